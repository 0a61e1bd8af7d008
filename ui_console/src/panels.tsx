// The console's plots, each with its table and its empty state (which says what to do).
import { Badge, Card, Heading, Link, Text } from "@chakra-ui/react";
import type { ReactNode } from "react";
import { airflowUrl, type Checkpoint, type LagSample, type Transaction } from "./api";
import { COLORS, LimitBars, seriesColor, TimePlot } from "./plots";
import { DataTable } from "./table";

const iso = (ms: number | null) => (ms === null ? "" : new Date(ms).toISOString().replace(".000Z", "Z"));
const statusColor = (c: Checkpoint) =>
  c.given_up || c.status === "ABORTED" ? COLORS.givenUp : c.status === "COMMITTED" ? COLORS.committed : COLORS.prepared;
const statusText = (c: Checkpoint) => (c.given_up ? `${c.status} (given up)` : c.status);

export function Panel(props: { id: string; title: string; help: string; children: ReactNode }) {
  return (
    <Card.Root data-panel={props.id} variant="outline">
      <Card.Header pb={0}>
        <Heading size="md">{props.title}</Heading>
        <Text color="fg.muted" fontSize="sm">
          {props.help}
        </Text>
      </Card.Header>
      <Card.Body>{props.children}</Card.Body>
    </Card.Root>
  );
}

export const Empty = (props: { children: ReactNode }) => (
  <Text data-empty color="fg.muted" fontSize="sm">
    {props.children}
  </Text>
);

export function Timeline(props: { checkpoints: Checkpoint[]; nowMs: number; focus?: number | null }) {
  const cps = props.checkpoints;
  const focused = cps.some((c) => c.checkpoint_id === props.focus) ? props.focus : null;
  if (cps.length === 0)
    return <Empty>No checkpoints in this pipeline yet: its first run writes one when it prepares its output.</Empty>;
  const end = (c: Checkpoint) => c.committed_at_ms ?? (c.status === "PREPARED" && !c.given_up ? props.nowMs : c.prepared_at_ms);
  return (
    <>
      <TimePlot
        label="Checkpoint timeline: records written, from prepared to committed"
        xs={cps.flatMap((c) => [c.prepared_at_ms, end(c)])}
        ys={cps.map((c) => c.records ?? 0)}
        yUnit="records"
      >
        {(s) =>
          cps.map((c) => {
            const y = s.y(c.records ?? 0);
            return (
              <g key={c.checkpoint_id} data-point={`checkpoint-${c.checkpoint_id}`} data-status={c.status} data-given-up={c.given_up}
                data-focused={c.checkpoint_id === focused || undefined}>
                {c.checkpoint_id === focused && (
                  <circle cx={s.x(c.prepared_at_ms)} cy={y} r={9} fill="none" stroke={COLORS.line} strokeWidth={2} />
                )}
                <title>{`checkpoint ${c.checkpoint_id}: ${statusText(c)}, ${c.records ?? "?"} records, run ${c.run ?? "?"}, batch ${c.batch ?? "?"}`}</title>
                <line x1={s.x(c.prepared_at_ms)} x2={s.x(end(c))} y1={y} y2={y} stroke={statusColor(c)} strokeWidth={3}
                  strokeDasharray={c.committed_at_ms === null ? "4 3" : undefined} />
                {c.given_up ? (
                  <path d={`M${s.x(c.prepared_at_ms) - 5},${y - 5}l10,10m0,-10l-10,10`} stroke={COLORS.givenUp} strokeWidth={2.5} />
                ) : (
                  <circle cx={s.x(c.prepared_at_ms)} cy={y} r={4} fill="none" stroke={statusColor(c)} strokeWidth={2} />
                )}
                {c.committed_at_ms !== null && <circle cx={s.x(c.committed_at_ms)} cy={y} r={4} fill={COLORS.committed} />}
              </g>
            );
          })
        }
      </TimePlot>
      <Text fontSize="xs" color="fg.muted">
        Ring: prepared; dot: committed; dashed: not committed (yet); cross: given up.
      </Text>
      <DataTable
        label="Checkpoints"
        rows={cps}
        rowKey={(c) => `checkpoint-${c.checkpoint_id}`}
        open={focused !== null}
        focus={focused === null ? undefined : `checkpoint-${focused}`}
        columns={[
          { key: "checkpoint_id", title: "Checkpoint", cell: (c) => c.checkpoint_id },
          { key: "status", title: "Status", cell: (c) => <Badge colorPalette={c.given_up ? "red" : c.status === "COMMITTED" ? "green" : "orange"}>{statusText(c)}</Badge> },
          { key: "records", title: "Records", cell: (c) => c.records ?? "?" },
          { key: "prepared", title: "Prepared", cell: (c) => iso(c.prepared_at_ms) },
          { key: "committed", title: "Committed", cell: (c) => iso(c.committed_at_ms) },
          { key: "run", title: "Run", cell: (c) => c.run ?? "" },
          { key: "batch", title: "Batch", cell: (c) => c.batch ?? "" },
          { key: "manifest", title: "Manifest", cell: (c) => c.manifest },
        ]}
      />
    </>
  );
}

export function Latency(props: { checkpoints: Checkpoint[] }) {
  const done = props.checkpoints.filter((c) => c.committed_at_ms !== null && c.commit_latency_ms !== null)
    .sort((a, b) => (a.committed_at_ms ?? 0) - (b.committed_at_ms ?? 0));
  if (done.length === 0)
    return <Empty>No committed checkpoint on this page: commit latency appears once the pipeline's commit task has run.</Empty>;
  return (
    <>
      <TimePlot label="Commit latency over time" xs={done.map((c) => c.committed_at_ms ?? 0)} ys={done.map((c) => c.commit_latency_ms ?? 0)} yUnit="ms">
        {(s) => (
          <>
            <polyline fill="none" stroke={COLORS.line} strokeWidth={1.5}
              points={done.map((c) => `${s.x(c.committed_at_ms ?? 0)},${s.y(c.commit_latency_ms ?? 0)}`).join(" ")} />
            {done.map((c) => (
              <circle key={c.checkpoint_id} data-point={`latency-${c.checkpoint_id}`} data-value={c.commit_latency_ms ?? 0}
                cx={s.x(c.committed_at_ms ?? 0)} cy={s.y(c.commit_latency_ms ?? 0)} r={3} fill={COLORS.line}>
                <title>{`checkpoint ${c.checkpoint_id}: committed ${c.commit_latency_ms} ms after it was prepared`}</title>
              </circle>
            ))}
          </>
        )}
      </TimePlot>
      <DataTable label="Commit latency" rows={done} rowKey={(c) => `latency-${c.checkpoint_id}`}
        columns={[
          { key: "checkpoint_id", title: "Checkpoint", cell: (c) => c.checkpoint_id },
          { key: "committed", title: "Committed", cell: (c) => iso(c.committed_at_ms) },
          { key: "latency", title: "Latency (ms)", cell: (c) => c.commit_latency_ms },
        ]} />
    </>
  );
}

export function OpenTransactions(props: { transactions: Transaction[] }) {
  const txns = props.transactions;
  if (txns.length === 0)
    return <Empty>No open transaction under this pipeline's prefixes: nothing holds a partition's last stable offset.</Empty>;
  return (
    <>
      <LimitBars label="Open transactions: age against the transaction timeout"
        bars={txns.map((t) => ({
          id: t.transactional_id, value: t.age_s, limit: t.timeout_s,
          color: t.kind === "orphan" ? COLORS.givenUp : t.kind === "commit-pending" ? COLORS.prepared : COLORS.line,
          title: `${t.transactional_id} (${t.kind}): open ${t.age_s} s of ${t.timeout_s ?? "?"} s`,
        }))} />
      <DataTable label="Open transactions" rows={txns} rowKey={(t) => t.transactional_id}
        columns={[
          { key: "transactional_id", title: "Transactional id", cell: (t) => t.transactional_id },
          { key: "kind", title: "Kind", cell: (t) => t.kind },
          { key: "age_s", title: "Age (s)", cell: (t) => t.age_s },
          { key: "timeout_s", title: "Timeout (s)", cell: (t) => t.timeout_s ?? "?" },
          { key: "partitions", title: "Holds the LSO of", cell: (t) => t.partitions },
        ]} />
    </>
  );
}

type LagRow = LagSample & { topic: string };

export function LsoLag(props: { history: Record<string, LagSample[]> }) {
  const rows: LagRow[] = Object.entries(props.history).flatMap(([topic, s]) => s.map((x) => ({ ...x, topic })));
  if (rows.length === 0)
    return (
      <Empty>
        No last-stable-offset samples for this pipeline's topic yet. Watch it with the lingering sensor
        (KafkaLingeringTransactionSensor's lso_partitions): every poll records each partition's lag here.
      </Empty>
    );
  const series = new Map<string, LagRow[]>();
  rows.forEach((r) => series.set(`${r.topic}-${r.partition}`, [...(series.get(`${r.topic}-${r.partition}`) ?? []), r]));
  return (
    <>
      <TimePlot label="Last-stable-offset lag per partition" xs={rows.map((r) => r.at_ms)} ys={rows.map((r) => r.lag)} yUnit="records">
        {(s) =>
          [...series.entries()].map(([name, points], i) => (
            <g key={name} data-series={name}>
              <title>{name}</title>
              <polyline fill="none" stroke={seriesColor(i)} strokeWidth={1.5} points={points.map((p) => `${s.x(p.at_ms)},${s.y(p.lag)}`).join(" ")} />
              {points.map((p) => (
                <circle key={p.at_ms} data-point={`lag-${name}-${p.at_ms}`} data-value={p.lag} cx={s.x(p.at_ms)} cy={s.y(p.lag)} r={2.5} fill={seriesColor(i)}>
                  <title>{`${name} at ${iso(p.at_ms)}: LSO ${p.lso}, high watermark ${p.hw}, lag ${p.lag}`}</title>
                </circle>
              ))}
            </g>
          ))
        }
      </TimePlot>
      <DataTable label="Last-stable-offset lag" rows={rows} rowKey={(r) => `${r.topic}-${r.partition}-${r.at_ms}`}
        columns={[
          { key: "partition", title: "Partition", cell: (r) => `${r.topic}-${r.partition}` },
          { key: "at", title: "Sampled", cell: (r) => iso(r.at_ms) },
          { key: "lso", title: "LSO", cell: (r) => r.lso },
          { key: "hw", title: "High watermark", cell: (r) => r.hw },
          { key: "lag", title: "Lag", cell: (r) => r.lag },
        ]} />
    </>
  );
}

export function Findings(props: { transactions: Transaction[] }) {
  if (props.transactions.length === 0)
    return <Empty>No lingering transaction: nothing to resolve.</Empty>;
  return (
    <DataTable label="Lingering findings" open rows={props.transactions} rowKey={(t) => `finding-${t.transactional_id}`}
      columns={[
        { key: "transactional_id", title: "Transactional id", cell: (t) => t.transactional_id },
        { key: "kind", title: "Kind", cell: (t) => <Badge colorPalette={t.kind === "orphan" ? "red" : t.kind === "writing" ? "blue" : "orange"}>{t.kind}</Badge> },
        { key: "next_step", title: "Next step", cell: (t) => t.next_step },
        { key: "runbook", title: "Runbook", cell: (t) => t.runbook ? <Link color="fg.info" href={airflowUrl(`kafka-eos/runbook/${t.runbook}`)}>{t.runbook}</Link> : "" },
        { key: "action", title: "Action", cell: (t) => t.action ? <Link color="fg.info" href={airflowUrl(`kafka-eos/${t.action.href}`)}>{t.action.label}</Link> : "" },
      ]} />
  );
}
