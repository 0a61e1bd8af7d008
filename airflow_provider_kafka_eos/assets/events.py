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

from collections.abc import Mapping
from typing import Any

from airflow_provider_kafka_eos.assets.lineage import kafka_asset_uri

__all__ = [
    "COMMITTED_ALIAS",
    "announce_committed_checkpoint",
    "committed_alias",
    "emit_committed_checkpoint",
    "settle_declared_topic_assets",
    "with_committed_alias",
]

COMMITTED_ALIAS = "kafka-eos-committed-checkpoints"


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
    extra = {
        "pipeline_id": report.get("pipeline_id"),
        "checkpoint_id": report.get("checkpoint_id"),
        "records": int(report.get("records") or 0),
        "transactions": int(report.get("transactions") or 0),
        "manifest_uri": report.get("manifest_uri"),
    }
    if uri in declared_asset_uris(context):
        events[Asset(uri)].extra = extra  # the declared outlet's own event (Airflow adds it on success)
    else:
        events[committed_alias()].add(Asset(uri), extra=extra)
    return uri


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
    operator: Any, context: Mapping[str, Any], report: Mapping[str, Any]
) -> None:
    """What the outside world hears when this try committed a checkpoint: metrics, lineage, Asset event."""
    from airflow_provider_kafka_eos.assets.lineage import kafka_namespace
    from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
    from airflow_provider_kafka_eos.tasks.metrics import record_commit

    record_commit(report)
    bootstrap = KafkaEosHook(kafka_eos_conn_id=operator.kafka_eos_conn_id).client_config().bootstrap_servers
    operator.set_lineage(outputs=[(kafka_namespace(bootstrap), str(report["topic"]))])
    uri = emit_committed_checkpoint(context, bootstrap_servers=bootstrap, report=report)
    settle_declared_topic_assets(operator, uri)
    if uri:
        operator.log.info("Asset event for %s: checkpoint %s, %s record(s)", uri, report.get("checkpoint_id"),
                          report.get("records"))
