"""Data-aware scheduling: one Airflow Asset event per checkpoint made visible in a topic.

The commit task is where records become visible to ``read_committed`` consumers, so it is where
downstream DAGs should be told. The event goes to the Asset ``kafka://host:port/topic`` (the name
OpenLineage gives the same topic, see ``lineage.py``) through the commit task's Asset *alias*,
because an alias emits only when the task adds an event: a task that declared the Asset itself
as an outlet would emit on every success, and a retried or cleared commit that committed nothing
new would trigger every downstream DAG again.

The rule: an event when *this* try turned the checkpoint's manifest from PREPARED into
COMMITTED and the checkpoint holds records; none for an already COMMITTED manifest (a rerun)
and none for an empty checkpoint. Its ``extra`` carries ``pipeline_id``, ``checkpoint_id``,
``records``, ``transactions`` and ``manifest_uri``. (A try that committed and then died before
it succeeded leaves no event: Airflow records outlet events only for a successful try.)

Partitions (Airflow >= 3.2, ``tasks/airflow_features.py``): the event on a *declared* topic Asset
carries ``partition_key`` = the checkpoint's input identity (:func:`checkpoint_partition_key`), so a
DAG on a ``PartitionedAssetTimetable`` gets one run per committed batch and knows which batch it is.
Airflow attaches per-event keys to declared outlets only (an alias event gets the DAG run's key), so
declare the topic's Asset on the commit task to get them. Older Airflow: the same event, no key.

Exactly one event per committed checkpoint also when the try that committed died before it
succeeded (a killed worker, a lost heartbeat): a later try, or a re-trigger, finds the manifest
already COMMITTED and asks Airflow for the topic's events since the commit; when none names this
checkpoint it emits the missing one (:func:`event_already_recorded`), otherwise nothing. The
cleanup DAG announces what it commits itself (:func:`announce_settled_checkpoints`). A checkpoint
committed elsewhere (the next run's restore, the CLI, a cleanup try that died before it succeeded),
or still PREPARED after its run failed, is committed and announced by the next run of its input
(:func:`owed_by_an_ended_run`: its commit task runs instead of being skipped).

The Asset page's "Producing Tasks" lists only tasks that *declare* the Asset as an outlet
(Airflow 3.3 writes ``task_outlet_asset_reference`` rows from the parsed DAG's outlets; an alias
creates none). So a DAG may declare its topic's Asset on the commit task (the example pipeline
does), and the rule above still holds: Airflow adds an event for every declared outlet of a
successful try, reading the task's ``outlets`` after ``execute()`` returns (the task runner's
success path), so ``settle_declared_topic_assets`` keeps a declared ``kafka://`` Asset only for
the try that committed records to that topic (the event then carries the extra
and goes out once, not through the alias as well) and removes the others for this try.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_provider_kafka_eos.assets.lineage import kafka_asset_uri
from airflow_provider_kafka_eos.tasks.airflow_features import has

__all__ = [
    "COMMITTED_ALIAS",
    "announce_committed_checkpoint",
    "announce_settled_checkpoints",
    "checkpoint_partition_key",
    "checkpoints_named",
    "committed_alias",
    "emit_committed_checkpoint",
    "event_already_recorded",
    "event_extra",
    "owed_by_an_ended_run",
    "settle_declared_topic_assets",
    "with_committed_alias",
]

COMMITTED_ALIAS = "kafka-eos-committed-checkpoints"
MAX_PARTITION_KEY_CHARS = 250  # Airflow's column width for partition_key
# How far before the manifest's commit time Airflow's events are searched: worker and API server clocks.
EVENT_SEARCH_SKEW_S = 600


def committed_alias() -> Any:
    from airflow.sdk import AssetAlias

    return AssetAlias(name=COMMITTED_ALIAS)


def with_committed_alias(outlets: Any) -> list[Any]:
    """The task's outlets plus the alias the commit emits through (once)."""
    current = list(outlets or []) if isinstance(outlets, (list, tuple)) else ([outlets] if outlets else [])
    alias = committed_alias()
    return current if alias in current else [*current, alias]


def emit_committed_checkpoint(
    context: Mapping[str, Any], *, bootstrap_servers: str, report: Mapping[str, Any]
) -> str | None:
    """Add the Asset event for a checkpoint this try committed; returns its URI (``None``: no event)."""
    from airflow.sdk import Asset

    events = context.get("outlet_events")
    if events is None or not int(report.get("records") or 0):
        return None  # not inside a task run (a direct execute() call), or nothing became visible
    uri = kafka_asset_uri(bootstrap_servers, str(report["topic"]))
    key = checkpoint_partition_key(report)
    extra = event_extra(report)
    if uri in declared_asset_uris(context):
        accessor = events[Asset(uri)]  # the declared outlet's own event (Airflow adds it on success)
        accessor.extra = extra
        if has("partitioned_asset_events"):
            accessor.add_partitions(key)
    else:  # an alias event carries the DAG run's partition key, not one of its own
        events[committed_alias()].add(Asset(uri), extra=extra)
    return uri


def event_extra(report: Mapping[str, Any]) -> dict[str, Any]:
    """The ``extra`` of the event announcing one committed checkpoint (its commit report's fields)."""
    return {
        "pipeline_id": report.get("pipeline_id"),
        "checkpoint_id": report.get("checkpoint_id"),
        "records": int(report.get("records") or 0),
        "transactions": int(report.get("transactions") or 0),
        "manifest_uri": report.get("manifest_uri"),
        "input_id": report.get("input_id"),
        "partition_key": checkpoint_partition_key(report),
    }


def checkpoints_named(extra: Mapping[str, Any] | None) -> set[tuple[Any, Any]]:
    """The ``(pipeline_id, checkpoint_id)`` pairs an event announces: its own fields, or each entry of
    ``checkpoints`` (one cleanup try that settled several checkpoints of one topic, see
    :func:`announce_settled_checkpoints`)."""
    extra = dict(extra or {})
    entries = extra.get("checkpoints") if isinstance(extra.get("checkpoints"), list) else [extra]
    return {(e.get("pipeline_id"), e.get("checkpoint_id")) for e in entries if isinstance(e, Mapping)}


def checkpoint_partition_key(report: Mapping[str, Any]) -> str:
    """The batch's partition key: its input identity, else ``checkpoint-<id>`` (a manifest without input).

    An identity longer than Airflow's 250-character key becomes ``input-sha256:<hex digest>``
    (stable: the same input always maps to the same key).
    """
    ident = report.get("input_id")
    if not ident:
        return f"checkpoint-{report.get('checkpoint_id')}"
    ident = str(ident)
    if len(ident) > MAX_PARTITION_KEY_CHARS:
        return "input-sha256:" + hashlib.sha256(ident.encode()).hexdigest()
    return ident


def event_already_recorded(uri: str, report: Mapping[str, Any]) -> bool:
    """Whether Airflow holds an Asset event for ``uri`` naming this checkpoint, since its commit.

    Asked through the task's supervisor (the Execution API), from inside a task run only. An
    answer Airflow cannot give counts as "recorded": a duplicate event would run every downstream
    DAG twice, a missing one is reported in the log for a person to emit again.
    """
    import datetime as dt

    from airflow.sdk.execution_time.context import InletEventsAccessor

    committed_ms = int(report.get("committed_at_ms") or 0)
    since = dt.datetime.fromtimestamp(max(0, committed_ms / 1000 - EVENT_SEARCH_SKEW_S), tz=dt.timezone.utc)
    wanted = (report.get("pipeline_id"), report.get("checkpoint_id"))
    try:
        # By name *and* URI (the topic's Asset is named by its URI): Airflow's lookup by URI alone sees
        # only Assets a DAG references, and one reached through the alias may be referenced by none.
        found = list(InletEventsAccessor(asset_name=uri, asset_uri=uri).after(since.isoformat()))
    except Exception:  # any failure to ask means "do not emit again"
        return True
    return any(wanted in checkpoints_named(e.extra) for e in found)


def owed_by_an_ended_run(conn_id: str, manifest_uri: str, access: Any) -> str | None:
    """What a re-trigger of an input already written owes it, once the run that wrote it has ended:

    - ``"commit"``: its checkpoint is still PREPARED (that run failed before its commit task did
      it): the re-trigger's commit task commits it, as the cleanup DAG would, and announces it;
    - ``"announce"``: it is COMMITTED with records and Airflow holds no Asset event for it (it was
      committed outside its run's commit task by something that announces nothing: the next
      run's restore, the CLI, a cleanup try that died before it succeeded): the re-trigger's
      commit task emits the missing event;
    - ``None``: nothing (skip, as for any duplicate).

    The submit task writes nothing either way. Asked from inside a task run only; any doubt is
    ``None``. Two re-triggers of one such input at the very same moment could both announce it.
    """
    from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
    from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint
    from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, read_manifest

    try:
        status = read_manifest(manifest_uri, access=access).status
        if status is ManifestStatus.PREPARED:
            return "commit"
        if status is not ManifestStatus.COMMITTED:
            return None
        report = commit_checkpoint(None, manifest_uri, committed_by="a re-trigger's check", access=access)
        if report.status != "already_committed" or not int(report.records or 0):
            return None
        bootstrap = KafkaEosHook(kafka_eos_conn_id=conn_id).client_config().bootstrap_servers
    except Exception:  # a store or connection that cannot answer: skip as before, announce nothing
        return None
    return None if event_already_recorded(kafka_asset_uri(bootstrap, report.topic), report.to_dict()) \
        else "announce"


def declared_asset_uris(context: Mapping[str, Any]) -> set[str]:
    """URIs of the Assets the running task declares as outlets."""
    task = getattr(context.get("ti"), "task", None)
    return {getattr(o, "uri", None) for o in (getattr(task, "outlets", None) or [])} - {None}


def settle_declared_topic_assets(operator: Any, emitted_uri: str | None) -> None:
    """Drop, for this try, every declared ``kafka://`` outlet but the topic this try made records visible in.

    Airflow would add an event for each of them on success (see the module docstring). A
    ``kafka://`` Asset naming another cluster (a DAG whose bootstrap setting differs from the
    connection's) is dropped too: the commit never makes records visible there. Other Assets are
    left as declared.
    """
    kept = [
        o for o in (operator.outlets or [])
        if not str(getattr(o, "uri", "") or "").startswith("kafka://") or o.uri == emitted_uri
    ]
    if len(kept) != len(operator.outlets or []):
        operator.outlets = kept


def announce_committed_checkpoint(
    operator: Any, context: Mapping[str, Any], report: Mapping[str, Any], *, recovering: bool = False
) -> None:
    """What the outside world hears when this try committed a checkpoint: metrics, lineage, Asset event.

    ``recovering``: the manifest was COMMITTED before this try (a rerun, or an earlier try that died
    after its commit): no metrics (nothing was committed now), and the Asset event only when Airflow
    has none for this checkpoint yet (:func:`event_already_recorded`).
    """
    from airflow_provider_kafka_eos.assets.lineage import kafka_namespace
    from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
    from airflow_provider_kafka_eos.tasks.metrics import record_commit

    bootstrap = KafkaEosHook(kafka_eos_conn_id=operator.kafka_eos_conn_id).client_config().bootstrap_servers
    if recovering:
        uri = kafka_asset_uri(bootstrap, str(report["topic"]))
        if context.get("outlet_events") is None or event_already_recorded(uri, report):
            settle_declared_topic_assets(operator, None)
            return
        operator.log.warning("checkpoint %s was committed by an earlier try that left no Asset event for %s: "
                             "emitting it now", report.get("checkpoint_id"), uri)
    else:
        record_commit(report)
    operator.set_lineage(outputs=[(kafka_namespace(bootstrap), str(report["topic"]))])
    uri = emit_committed_checkpoint(context, bootstrap_servers=bootstrap, report=report)
    settle_declared_topic_assets(operator, uri)
    if uri:
        operator.log.info("Asset event for %s: checkpoint %s, %s record(s), partition key %r", uri,
                          report.get("checkpoint_id"), report.get("records"),
                          checkpoint_partition_key(report))


def announce_settled_checkpoints(
    context: Mapping[str, Any], *, bootstrap_servers: str, reports: Iterable[Mapping[str, Any]]
) -> list[str]:
    """Announce what a task outside the pipeline committed (the cleanup DAG's ``commit_pending``).

    Why: a run that failed with its checkpoint PREPARED, or whose Spark job prepared it after the
    run had ended, is committed by the cleanup; a re-trigger of its input announces it only when it
    comes after that commit (the production soak of 2026-11-28 had one come before: the event was
    never emitted). So the try that makes such a checkpoint visible announces it, as the pipeline's
    commit task would: one event per checkpoint with records, on the topic's Asset with
    ``partition_key`` = its input identity when Airflow knows that Asset (a pipeline DAG declares
    it: the Asset joins this try's outlets, and Airflow records the events of the outlets a
    successful try has when it ends), else through the alias (keyless, as for the commit task).
    Several checkpoints of one topic in one try share the Asset's one ``extra``: it lists them under
    ``checkpoints`` (:func:`checkpoints_named`), with one event per partition key.

    Only reports with status ``committed`` (made visible by this try): one found COMMITTED was
    announced by the try that committed it, or is owed by the next run of its input
    (:func:`owed_by_an_ended_run`). Returns the URIs announced.
    """
    from airflow.sdk import Asset

    events = context.get("outlet_events")
    task = getattr(context.get("ti"), "task", None)
    settled = [r for r in reports if r.get("status") == "committed" and int(r.get("records") or 0)]
    if events is None or task is None or not settled:
        return []  # not inside a task run, or nothing this try made visible
    by_uri: dict[str, list[Mapping[str, Any]]] = {}
    for report in settled:
        by_uri.setdefault(kafka_asset_uri(bootstrap_servers, str(report["topic"])), []).append(report)
    for uri, group in by_uri.items():
        asset = _declared_somewhere(uri)
        if asset is None:  # no DAG declares the topic: the alias creates the Asset, without a key
            task.outlets = with_committed_alias(task.outlets)
            for report in group:
                events[committed_alias()].add(Asset(uri), extra=event_extra(report))
            continue
        task.outlets = [*(task.outlets or []), asset]
        accessor = events[asset]
        extras = [event_extra(r) for r in group]
        accessor.extra = extras[0] if len(extras) == 1 else {"checkpoints": extras}
        if has("partitioned_asset_events"):
            accessor.add_partitions(sorted({checkpoint_partition_key(r) for r in group}))
    return sorted(by_uri)


def _declared_somewhere(uri: str) -> Any:
    """The topic's Asset as Airflow holds it while a DAG declares it (Airflow calls it *active*), else
    ``None``. Asked through the task's supervisor (the Execution API's asset-by-URI lookup, which
    answers for active Assets only); no answer counts as "not declared" (the alias path then)."""
    from airflow.sdk import Asset
    from airflow.sdk.execution_time.comms import ErrorResponse, GetAssetByUri
    from airflow.sdk.execution_time.task_runner import SUPERVISOR_COMMS

    try:
        found = SUPERVISOR_COMMS.send(GetAssetByUri(uri=uri))
    except Exception:  # the supervisor could not ask: fall back to the alias, never fail the commit's task
        return None
    if found is None or isinstance(found, ErrorResponse):
        return None
    return Asset(name=found.name, uri=found.uri, group=found.group)
