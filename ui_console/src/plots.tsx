// Small SVG plots of our own (no plot library: four shapes, Airflow's colours through Chakra's
// CSS variables, so light and dark follow Airflow's colour mode). Each point carries data-*
// attributes and a <title> (hover text, and what a screen reader or a test reads).
import type { ReactNode } from "react";

export const COLORS = {
  committed: "var(--chakra-colors-green-solid, #16a34a)",
  prepared: "var(--chakra-colors-orange-solid, #ea580c)",
  givenUp: "var(--chakra-colors-red-solid, #dc2626)",
  line: "var(--chakra-colors-blue-solid, #2563eb)",
  axis: "var(--chakra-colors-border-emphasized, #9ca3af)",
  text: "var(--chakra-colors-fg-muted, #6b7280)",
};
const SERIES = ["blue", "purple", "teal", "pink", "cyan", "orange", "green", "red"];
export const seriesColor = (i: number) => `var(--chakra-colors-${SERIES[i % SERIES.length]}-solid)`;

const W = 800;
const H = 220;
const M = { left: 64, right: 40, top: 24, bottom: 28 };

export type Scale = { x: (v: number) => number; y: (v: number) => number };

function extent(values: number[], zero: boolean): [number, number] {
  let lo = Math.min(...values, ...(zero ? [0] : []));
  let hi = Math.max(...values);
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [0, 1];
  if (lo === hi) [lo, hi] = [lo - 1, hi + 1];
  return [lo, hi];
}

const time = (ms: number) => new Date(ms).toLocaleTimeString([], { hour12: false });

function ticks([lo, hi]: [number, number], n = 4): number[] {
  return Array.from({ length: n + 1 }, (_, i) => lo + ((hi - lo) * i) / n);
}

const short = (v: number) =>
  Math.abs(v) >= 1e6 ? `${(v / 1e6).toFixed(1)}M` : Math.abs(v) >= 1e3 ? `${(v / 1e3).toFixed(1)}k` : `${Math.round(v)}`;

/** Axes over a time x-range and a numeric y-range; ``children(scale)`` draws the marks. */
export function TimePlot(props: {
  label: string;
  xs: number[];
  ys: number[];
  yUnit: string;
  children: (scale: Scale) => ReactNode;
}) {
  const xr = extent(props.xs, false);
  const yr = extent(props.ys, true);
  const scale: Scale = {
    x: (v) => M.left + ((v - xr[0]) / (xr[1] - xr[0])) * (W - M.left - M.right),
    y: (v) => H - M.bottom - ((v - yr[0]) / (yr[1] - yr[0])) * (H - M.top - M.bottom),
  };
  return (
    <svg role="img" aria-label={props.label} viewBox={`0 0 ${W} ${H}`} width="100%" style={{ maxHeight: 260 }}>
      <line x1={M.left} x2={W - M.right} y1={H - M.bottom} y2={H - M.bottom} stroke={COLORS.axis} />
      <line x1={M.left} x2={M.left} y1={M.top} y2={H - M.bottom} stroke={COLORS.axis} />
      {ticks(yr).map((v) => (
        <text key={`y${v}`} x={M.left - 6} y={scale.y(v) + 4} textAnchor="end" fontSize={11} fill={COLORS.text}>
          {short(v)}
        </text>
      ))}
      {ticks(xr).map((v) => (
        <text key={`x${v}`} x={scale.x(v)} y={H - 8} textAnchor="middle" fontSize={11} fill={COLORS.text}>
          {time(v)}
        </text>
      ))}
      <text x={M.left} y={12} textAnchor="middle" fontSize={11} fill={COLORS.text}>
        {props.yUnit}
      </text>
      {props.children(scale)}
    </svg>
  );
}

/** Horizontal bars of value against a limit (an open transaction's age against its timeout). */
export function LimitBars(props: {
  label: string;
  bars: { id: string; value: number; limit: number | null; color: string; title: string }[];
}) {
  const rowH = 22;
  const height = M.top + props.bars.length * rowH + M.bottom;
  const span = Math.max(1, ...props.bars.map((b) => Math.max(b.value, b.limit ?? 0)));
  const x = (v: number) => 200 + (v / span) * (W - 200 - M.right);
  return (
    <svg role="img" aria-label={props.label} viewBox={`0 0 ${W} ${height}`} width="100%">
      {props.bars.map((b, i) => {
        const y = M.top + i * rowH;
        return (
          <g key={b.id} data-bar={b.id} data-value={b.value} data-limit={b.limit ?? ""}>
            <title>{b.title}</title>
            <text x={194} y={y + 15} textAnchor="end" fontSize={11} fill={COLORS.text}>
              {b.id.length > 20 ? `…${b.id.slice(-19)}` : b.id}
            </text>
            <rect x={200} y={y + 3} width={Math.max(2, x(b.value) - 200)} height={rowH - 6} fill={b.color} rx={2} />
            {b.limit !== null && (
              <line x1={x(b.limit)} x2={x(b.limit)} y1={y} y2={y + rowH} stroke={COLORS.givenUp} strokeWidth={2} strokeDasharray="3 2" />
            )}
          </g>
        );
      })}
      <text x={200} y={height - 8} fontSize={11} fill={COLORS.text}>
        age (s); dashed: the transaction timeout, where Kafka aborts it
      </text>
    </svg>
  );
}
