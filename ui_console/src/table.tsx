// The table behind every plot: the same points as text (copyable, read by screen readers).
import { Box, Table } from "@chakra-ui/react";
import { type ReactNode, useEffect, useRef, useState } from "react";

export type Column<T> = { key: string; title: string; cell: (row: T) => ReactNode };

/** Rendered when opened: hundreds of styled rows cost more than the plot (the 10,000-checkpoint
 * store's page drew in 3 s with every table rendered closed, under 2 s without). */
export function DataTable<T>(props: {
  label: string;
  columns: Column<T>[];
  rows: T[];
  rowKey: (row: T) => string;
  open?: boolean;
  /** The key of a row to highlight and scroll to (the checkpoint a task's link names). */
  focus?: string;
}) {
  const [open, setOpen] = useState(props.open ?? false);
  const focused = useRef<HTMLTableRowElement | null>(null);
  useEffect(() => {
    if (open && focused.current) focused.current.scrollIntoView({ block: "nearest" });
  }, [open, props.focus]);
  return (
    <details open={open} onToggle={(e) => setOpen(e.currentTarget.open)} data-table={props.label} style={{ marginTop: "0.5rem" }}>
      <Box as="summary" cursor="pointer" color="fg.muted" fontSize="sm">
        {props.label}: table ({props.rows.length} rows)
      </Box>
      {open && <Box overflowX="auto" maxH="420px" overflowY="auto" mt={2}>
        <Table.Root size="sm" variant="outline" aria-label={props.label}>
          <Table.Header>
            <Table.Row>
              {props.columns.map((c) => (
                <Table.ColumnHeader key={c.key}>{c.title}</Table.ColumnHeader>
              ))}
            </Table.Row>
          </Table.Header>
          <Table.Body>
            {props.rows.map((row) => (
              <Table.Row
                key={props.rowKey(row)}
                data-row={props.rowKey(row)}
                {...(props.rowKey(row) === props.focus ? { ref: focused, "data-focused": true, bg: "bg.emphasized", "aria-current": "true" as const } : {})}
              >
                {props.columns.map((c) => (
                  <Table.Cell key={c.key} data-column={c.key}>
                    {c.cell(row)}
                  </Table.Cell>
                ))}
              </Table.Row>
            ))}
          </Table.Body>
        </Table.Root>
      </Box>}
    </details>
  );
}
