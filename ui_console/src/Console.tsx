// The operators' console: one pipeline's health at a glance, refreshed by itself.
import { Alert, Box, Button, Heading, HStack, Input, NativeSelect, SimpleGrid, Spinner, Stack, Text } from "@chakra-ui/react";
import { useCallback, useEffect, useMemo, useState } from "react";
import { advice, fetchPipeline, fetchPipelines, fetchTransactions, type PipelinePage, type Transaction } from "./api";
import { Findings, Latency, LsoLag, OpenTransactions, Panel, Timeline } from "./panels";

const REFRESH_MS = 15_000;
const PAGE = 200;

type Loaded<T> = { data?: T; error?: unknown; loading: boolean };

function ErrorState(props: { what: string; error: unknown; connId: string }) {
  const message = props.error instanceof Error ? props.error.message : String(props.error);
  return (
    <Alert.Root status="error" data-error>
      <Alert.Indicator />
      <Alert.Content>
        <Alert.Title>Cannot read {props.what}</Alert.Title>
        <Alert.Description>
          {message} {advice(props.error, props.connId)}
        </Alert.Description>
      </Alert.Content>
    </Alert.Root>
  );
}

function useLoad<T>(load: (() => Promise<T>) | null, tick: number): Loaded<T> {
  const [state, setState] = useState<Loaded<T>>({ loading: load !== null });
  useEffect(() => {
    if (load === null) return setState({ loading: false });
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => live && setState({ data, loading: false }),
      (error) => live && setState({ error, loading: false }),
    );
    return () => {
      live = false;
    };
  }, [load, tick]);
  return state;
}

const initial = (name: string, fallback: string) => new URLSearchParams(window.location.search).get(name) ?? fallback;

/** ``checkpoint_id=`` in the URL (a task's extra link): the checkpoint to open and highlight. */
function linkedCheckpoint(): number | null {
  const raw = initial("checkpoint_id", "");
  return /^\d+$/.test(raw) ? Number(raw) : null;
}

/** Where the page sits and the way to the newer and older ones (the store's ids, newest first). */
function Pager(props: { page: PipelinePage; onNewest: () => void; onNewer: () => void; onOlder: () => void }) {
  const { page } = props;
  const first = page.newer + 1;
  const last = page.newer + page.checkpoints.length;
  return (
    <HStack gap={2} data-pager wrap="wrap">
      <Text fontSize="sm" data-summary>
        {page.before === null
          ? `Pipeline ${page.pipeline_id}: ${page.total} checkpoint(s); the newest ${Math.min(page.total, page.limit)} shown.`
          : `Pipeline ${page.pipeline_id}: ${page.total} checkpoint(s); checkpoints ${first}-${last} from the newest shown.`}
      </Text>
      <Button size="xs" variant="outline" disabled={page.newer === 0} onClick={props.onNewest}>Newest</Button>
      <Button size="xs" variant="outline" disabled={page.newer === 0} onClick={props.onNewer}>Newer</Button>
      <Button size="xs" variant="outline" disabled={page.older === 0} onClick={props.onOlder}>Older</Button>
    </HStack>
  );
}

export function Console() {
  const [connId, setConnId] = useState(() => initial("conn_id", "kafka_eos_default"));
  const [draft, setDraft] = useState(connId);
  const [pipeline, setPipeline] = useState(() => initial("pipeline_id", ""));
  const [focus] = useState(linkedCheckpoint);
  // The page: null is the newest; else the ids below ``before``. ``newerPages`` is the way back.
  const [before, setBefore] = useState<number | null>(() => (focus === null ? null : focus + 1));
  const [newerPages, setNewerPages] = useState<(number | null)[]>([]);
  const [auto, setAuto] = useState(true);
  const [tick, setTick] = useState(0);
  const [updated, setUpdated] = useState<Date | null>(null);

  useEffect(() => {
    if (!auto) return;
    const timer = window.setInterval(() => setTick((t) => t + 1), REFRESH_MS);
    return () => window.clearInterval(timer);
  }, [auto]);

  const pipelines = useLoad(useCallback(() => fetchPipelines(connId), [connId]), tick);
  const names = pipelines.data?.pipelines ?? [];
  const chosen = pipeline || names[0] || "";
  const page = useLoad<PipelinePage>(
    useMemo(() => (chosen ? () => fetchPipeline(connId, chosen, PAGE, before) : null), [connId, chosen, before]),
    tick,
  );
  const newest = () => {
    setBefore(null);
    setNewerPages([]);
  };
  const choosePipeline = (name: string) => {
    setPipeline(name);
    newest();
  };
  const prefixes = page.data?.transactional_id_prefixes.join(",") ?? "";
  const txns = useLoad<{ transactions: Transaction[] }>(
    useCallback(() => (prefixes ? fetchTransactions(connId, prefixes.split(",")) : Promise.resolve({ transactions: [] })), [connId, prefixes]),
    tick,
  );
  useEffect(() => {
    if (page.data) setUpdated(new Date());
  }, [page.data]);

  const cp = page.data;
  return (
    <Box p={4} data-console="kafka-eos">
      <Stack gap={4}>
        <HStack justify="space-between" wrap="wrap" gap={3}>
          <Box>
            <Heading size="xl">Kafka exactly-once console</Heading>
            <Text color="fg.muted" fontSize="sm">
              Read-only. Store {pipelines.data?.store ?? "…"} of connection {connId}
              {updated && ` · updated ${updated.toLocaleTimeString([], { hour12: false })}`}
              {(page.loading || txns.loading) && <Spinner size="xs" ml={2} />}
            </Text>
          </Box>
          <HStack gap={2}>
            <form onSubmit={(e) => { e.preventDefault(); setConnId(draft.trim() || "kafka_eos_default"); choosePipeline(""); }}>
              <HStack gap={1}>
                <Input size="sm" width="14rem" aria-label="Connection id" value={draft} onChange={(e) => setDraft(e.target.value)} />
                <Button size="sm" type="submit" variant="outline">Use</Button>
              </HStack>
            </form>
            <NativeSelect.Root size="sm" width="16rem" disabled={names.length === 0}>
              <NativeSelect.Field aria-label="Pipeline" value={chosen} onChange={(e) => choosePipeline(e.target.value)}>
                {names.map((n) => <option key={n} value={n}>{n}</option>)}
              </NativeSelect.Field>
              <NativeSelect.Indicator />
            </NativeSelect.Root>
            <Button size="sm" variant={auto ? "solid" : "outline"} onClick={() => setAuto(!auto)} aria-pressed={auto}>
              Auto refresh {auto ? "on" : "off"}
            </Button>
            <Button size="sm" variant="ghost" onClick={() => setTick((t) => t + 1)}>Refresh</Button>
          </HStack>
        </HStack>
        {pipelines.error !== undefined && <ErrorState what="the pipelines" error={pipelines.error} connId={connId} />}
        {pipelines.data && names.length === 0 && (
          <Alert.Root status="info" data-empty>
            <Alert.Indicator />
            <Alert.Description>
              The store {pipelines.data.store} holds no pipeline yet: run a pipeline DAG (eos_pipeline) with this
              connection, or pick the connection whose manifest_base_uri your pipelines use.
            </Alert.Description>
          </Alert.Root>
        )}
        {chosen && page.error !== undefined && <ErrorState what={`pipeline ${chosen}`} error={page.error} connId={connId} />}
        {cp && (
          <>
            <Pager
              page={cp}
              onNewest={newest}
              onNewer={() => {
                setBefore(newerPages.at(-1) ?? null);
                setNewerPages(newerPages.slice(0, -1));
              }}
              onOlder={() => {
                const oldest = cp.checkpoints.at(-1);
                if (oldest === undefined) return;
                setNewerPages([...newerPages, before]);
                setBefore(oldest.checkpoint_id);
              }}
            />
            {focus !== null && before === focus + 1 && !cp.checkpoints.some((c) => c.checkpoint_id === focus) && (
              <Alert.Root status="warning" data-missing-checkpoint>
                <Alert.Indicator />
                <Alert.Description>
                  Checkpoint {focus} is not in pipeline {cp.pipeline_id}'s store {cp.store}: the link names another
                  store or pipeline, or its manifest was removed. Showing the older checkpoints; press Newest for the newest.
                </Alert.Description>
              </Alert.Root>
            )}
            <Panel id="timeline" title="Checkpoint timeline" help="Each checkpoint from prepared to committed, at its record count.">
              <Timeline checkpoints={cp.checkpoints} nowMs={cp.now_ms} focus={focus} />
            </Panel>
            <SimpleGrid columns={{ base: 1, xl: 2 }} gap={4}>
              <Panel id="latency" title="Commit latency" help="How long each checkpoint waited from prepared to its commit.">
                <Latency checkpoints={cp.checkpoints} />
              </Panel>
              <Panel id="lag" title="Last-stable-offset lag" help="Per output partition: records read_committed consumers cannot read yet.">
                <LsoLag history={cp.lso_history} />
              </Panel>
            </SimpleGrid>
            <Panel id="open" title="Open transactions" help="Age of each open transaction against its timeout.">
              {txns.error !== undefined ? <ErrorState what="the open transactions" error={txns.error} connId={connId} /> : <OpenTransactions transactions={txns.data?.transactions ?? []} />}
            </Panel>
            <Panel id="findings" title="Lingering findings" help="What to do about each open transaction: its runbook page and a pre-filled request (a dry run until you untick it).">
              {txns.error === undefined && <Findings transactions={txns.data?.transactions ?? []} />}
            </Panel>
          </>
        )}
      </Stack>
    </Box>
  );
}
