// The console's data: the provider's JSON endpoints in Airflow's API server, read as the logged-in
// user (Airflow's session cookie), so Airflow's permissions decide what the console may show.

export type Checkpoint = {
  checkpoint_id: number;
  status: "PREPARED" | "COMMITTED" | "ABORTED";
  given_up: boolean;
  prepared_at_ms: number;
  committed_at_ms: number | null;
  commit_latency_ms: number | null;
  records: number | null;
  transactions: number;
  run: string | null;
  dag_id: string | null;
  batch: string | null;
  topic: string;
  manifest: string;
};

export type LagSample = { at_ms: number; partition: number; lso: number; hw: number; lag: number };

export type PipelinePage = {
  conn_id: string;
  store: string;
  pipeline_id: string;
  total: number;
  limit: number;
  before: number | null;
  /** How many checkpoints are newer / older than this page (the pager's two directions). */
  newer: number;
  older: number;
  checkpoints: Checkpoint[];
  topics: string[];
  transactional_id_prefixes: string[];
  lso_history: Record<string, LagSample[]>;
  now_ms: number;
};

export type Transaction = {
  transactional_id: string;
  kind: string;
  age_s: number;
  timeout_s: number | null;
  partitions: string;
  manifest_uri: string | null;
  reason: string;
  next_step: string;
  runbook: string | null;
  action: { label: string; href: string } | null;
};

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** A URL under Airflow's base (its <base href>), so a deployment under a path prefix works. */
export const airflowUrl = (path: string): string => new URL(path, document.baseURI).href;

async function getJson<T>(path: string, params: Record<string, string | number>): Promise<T> {
  const query = new URLSearchParams(Object.entries(params).map(([k, v]) => [k, String(v)]));
  const response = await fetch(`${airflowUrl(path)}?${query}`, { credentials: "same-origin" });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const detail = body.error ?? body.detail ?? response.statusText;
    throw new ApiError(response.status, typeof detail === "string" ? detail : JSON.stringify(detail));
  }
  return body as T;
}

export const fetchPipelines = (connId: string) =>
  getJson<{ store: string; pipelines: string[] }>("kafka-eos-console/api/pipelines", { conn_id: connId });

/** One page, newest first: the newest checkpoints, or those with an id below ``before``. */
export const fetchPipeline = (connId: string, pipelineId: string, limit: number, before: number | null) =>
  getJson<PipelinePage>("kafka-eos-console/api/pipeline", {
    conn_id: connId,
    pipeline_id: pipelineId,
    limit,
    ...(before === null ? {} : { before }),
  });

export const fetchTransactions = (connId: string, prefixes: string[]) =>
  getJson<{ transactions: Transaction[] }>("kafka-eos/api/transactions", {
    conn_id: connId,
    prefixes: prefixes.join(","),
  });

/** What to do about an error, for a person: the server's own message names the object and cause. */
export function advice(error: unknown, connId: string): string {
  if (error instanceof ApiError) {
    if (error.status === 401) return "Your Airflow session has ended: log in again.";
    if (error.status === 403)
      return `Your Airflow user may not read connection ${connId}: ask an Airflow admin for read access to it, or pick another connection.`;
    if (error.status === 404) return "Nothing was read: type the id of an existing kafka_eos connection and press Use.";
    if (error.status === 503) return "Nothing was changed. Fix what the message names, then wait for the next refresh.";
    if (error.status === 422) return "A field of the request is out of range: check the connection id.";
  }
  return "The API server did not answer: check that it runs, then wait for the next refresh.";
}
