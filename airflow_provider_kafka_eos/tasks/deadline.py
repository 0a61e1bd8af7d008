"""A deadline on a pipeline DAG: alert while a PREPARED checkpoint can still be committed.

The broker aborts a prepared transaction ``transaction.timeout.ms`` after it started; a batch
whose commit did not happen by then is lost. :func:`transaction_deadline` gives the pipeline DAG
an Airflow ``DeadlineAlert``: reference ``DAGRUN_QUEUED_AT``, interval ``fraction`` x the
transaction timeout (default :data:`DEFAULT_FRACTION`). A checkpoint is prepared after its run was
queued, so the alert fires no later than the moment a checkpoint of the run has been PREPARED for
that fraction of its timeout (earlier when the run spent time before preparing). A run that
succeeds before the deadline removes it (Airflow prunes it); a run that failed with its checkpoint
still PREPARED (the commit task failed) keeps it, and that is the case the alert exists for.

Why not a deadline measured from the prepare itself: Airflow's deadline references are evaluated
when the run is created or queued, and nothing in Airflow knows when the job prepared. The queued
time is the earliest bound that is always known; the callback then reads the real ages from the
manifests and says them.

The callback (:func:`prepared_checkpoint_alert`, an ``AsyncCallback``: it runs in the triggerer)
reads the pipeline's manifest store the way the operators do (the connection's store and
credentials, ``KafkaEosHook``), changes nothing, is bounded by ``read_timeout_s``, and logs at
ERROR every PREPARED checkpoint with its age, its time left and the runbook page, or at WARNING
that nothing is PREPARED (the run is slow). Its text is also its result (Airflow keeps it as the
callback's output). Airflow without deadline alerts (``airflow_features``): no deadline, logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import Manifest
from airflow_provider_kafka_eos.kafka.operations.prepared_deadline import DeadlineVerdict, judge_prepared
from airflow_provider_kafka_eos.tasks.airflow_features import has
from airflow_provider_kafka_eos.tasks.dag_run import checkpoint_id_of_run_record

__all__ = ["DEFAULT_FRACTION", "deadline_fraction", "prepared_checkpoint_alert", "transaction_deadline"]

log = logging.getLogger(__name__)

DEFAULT_FRACTION = 0.5  # half the timeout left to act: a commit needs seconds, a person minutes
DEFAULT_READ_TIMEOUT_S = 60.0
RECENT_CHECKPOINTS = 500  # how far back the alert looks (the store's newest, by id)
_OFF = ("", "off", "none", "0")


def deadline_fraction(text: str | None, *, setting: str = "the deadline fraction") -> float | None:
    """A fraction setting as text: None (no deadline) for off/none/0, else a number in (0, 1)."""
    value = (text if text is not None else str(DEFAULT_FRACTION)).strip().lower()
    if value in _OFF:
        return None
    try:
        fraction = float(value)
    except ValueError:
        raise ValueError(f"{setting} is {text!r}: give a number between 0 and 1 (e.g. {DEFAULT_FRACTION}), "
                         "or off for no deadline") from None
    if not 0 < fraction < 1:
        raise ValueError(f"{setting} is {text!r}: it must lie between 0 and 1 (a deadline at or past the "
                         "transaction timeout fires when the batch is already lost); off for no deadline")
    return fraction


def transaction_deadline(*, kafka_eos_conn_id: str, pipeline_id: str, transaction_timeout_ms: int,
                         manifest_base_uri: str | None = None, fraction: float | None = DEFAULT_FRACTION,
                         read_timeout_s: float = DEFAULT_READ_TIMEOUT_S) -> Any | None:
    """The ``DeadlineAlert`` for a pipeline DAG (``DAG(deadline=...)``), or None.

    None when ``fraction`` is None (switched off) or the running Airflow has no deadline alerts
    (logged by name). ``transaction_timeout_ms`` is the one the DAG's submit task passes.
    """
    if fraction is None:
        return None
    if not 0 < fraction < 1 or transaction_timeout_ms <= 0:
        raise ValueError(f"pipeline {pipeline_id!r}: the deadline needs 0 < fraction < 1 and a positive "
                         f"transaction timeout (got {fraction}, {transaction_timeout_ms} ms)")
    if not has("deadline_alerts"):
        log.info("pipeline %r: no transaction deadline (this Airflow has no deadline alerts, added in 3.1)",
                 pipeline_id)
        return None
    from airflow.sdk.definitions.deadline import AsyncCallback, DeadlineAlert, DeadlineReference

    kwargs = {"kafka_eos_conn_id": kafka_eos_conn_id, "pipeline_id": pipeline_id,
              "manifest_base_uri": manifest_base_uri, "fraction": fraction,
              "transaction_timeout_ms": int(transaction_timeout_ms), "read_timeout_s": float(read_timeout_s)}
    return DeadlineAlert(
        reference=DeadlineReference.DAGRUN_QUEUED_AT,
        interval=timedelta(milliseconds=round(fraction * transaction_timeout_ms)),
        callback=AsyncCallback(prepared_checkpoint_alert, kwargs=kwargs),
    )


def _run_overrides(context: Any, pipeline_id: str, manifest_base_uri: str | None) -> tuple[str, str | None,
                                                                                          str | None]:
    """(pipeline id, store, run id) of the run: its conf's ``pipeline_id``/``manifest_base_uri`` (the
    example DAGs' params) override the DAG's, as they did for the run's tasks."""
    dag_run = (context or {}).get("dag_run") or {}
    conf = dag_run.get("conf") or {}
    return (str(conf.get("pipeline_id") or pipeline_id), conf.get("manifest_base_uri") or manifest_base_uri,
            dag_run.get("dag_run_id") or dag_run.get("run_id"))


def _read_manifests(conn_id: str, pipeline_id: str, manifest_base_uri: str | None, own_checkpoint: int | None
                    ) -> tuple[list[Manifest], int]:
    """The pipeline's newest :data:`RECENT_CHECKPOINTS` manifests and the run's own checkpoint,
    through the connection's store and credentials (blocking, read only): one listing and that many
    reads, not one read per checkpoint the pipeline ever wrote (a checkpoint further back than that,
    at one a minute, is hours past any transaction timeout a broker allows, unless a backfill wrote it
    late). The run's own checkpoint (``own_checkpoint``: the id its submit task derives from the
    run, a backfill's among the oldest) is read by name wherever it lies. Returns them and how many
    other older checkpoints were not read, so the alert says what it did not look at instead of
    "nothing PREPARED" for the whole pipeline.

    A store that does not exist fails by name: listing it finds nothing, which must not read as
    "nothing PREPARED" (a wrong store setting would hide every checkpoint at risk).
    """
    from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
    from airflow_provider_kafka_eos.kafka.checkpoints.manifest import read_manifest, store_exists
    from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import read_object
    from airflow_provider_kafka_eos.kafka.errors import ManifestStoreError

    hook = KafkaEosHook(kafka_eos_conn_id=conn_id)
    store = hook.manifest_store(manifest_base_uri)
    if not store_exists(store.base_uri, access=store.access):
        raise ManifestStoreError(f"manifest store {store.base_uri} (from {store.source}) does not exist: "
                                 f"cannot tell whether a checkpoint of pipeline {pipeline_id!r} is at risk; "
                                 "fix the setting or the store")
    page = store.newest(pipeline_id, RECENT_CHECKPOINTS)
    manifests = [m for _, m in page.manifests]
    oldest_read = min((m.checkpoint_id for m in manifests), default=None)
    if own_checkpoint is None or oldest_read is None or own_checkpoint >= oldest_read:
        return manifests, page.older  # on the page, or not written (a listing that found nothing)
    uri = store.uri(pipeline_id, own_checkpoint)
    if read_object(uri, access=store.access) is None:  # not written (yet), or under an explicit id
        return manifests, page.older
    return [*manifests, read_manifest(uri, access=store.access)], page.older - 1


async def prepared_checkpoint_alert(*, kafka_eos_conn_id: str, pipeline_id: str, fraction: float,
                                    transaction_timeout_ms: int, manifest_base_uri: str | None = None,
                                    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
                                    context: dict[str, Any] | None = None) -> str:
    """The deadline's callback (triggerer): name the pipeline's PREPARED checkpoints, or say there are none.

    Read only. A store that cannot be read within ``read_timeout_s`` (or at all) raises, so Airflow
    records the callback as failed with the reason; the thread reading it is left to its own timeouts.
    """
    from airflow_provider_kafka_eos.kafka.errors import ManifestStoreError

    pipeline, store, run_id = _run_overrides(context, pipeline_id, manifest_base_uri)
    own_checkpoint = checkpoint_id_of_run_record((context or {}).get("dag_run") or {})
    deadline_text = (f"{fraction:g} of the {transaction_timeout_ms / 1000:g} s transaction timeout after it "
                     "was queued")
    try:
        manifests, unread = await asyncio.wait_for(
            asyncio.to_thread(_read_manifests, kafka_eos_conn_id, pipeline, store, own_checkpoint),
            timeout=read_timeout_s)
    except TimeoutError:
        text = (f"pipeline {pipeline!r}: run {run_id!r} passed its deadline ({deadline_text}) and its "
                f"manifest store did not answer within {read_timeout_s:g} s: cannot tell whether a "
                "checkpoint is at risk. Look with kafka-eos-txn checkpoints --manifest-base <store> "
                f"--pipeline-id {pipeline}")
        log.error(text)
        raise ManifestStoreError(text, runbook="manifest-store") from None
    except Exception as err:  # unreachable store, a malformed manifest: said here, then Airflow records it
        log.error("pipeline %r: run %r passed its deadline (%s) and its manifests could not be read, so "
                  "nothing can be said about its checkpoints: %s", pipeline, run_id, deadline_text, err)
        raise
    verdict = judge_prepared(manifests, pipeline_id=pipeline, run_id=run_id, now_ms=int(time.time() * 1000))
    return _report(verdict, deadline_text, unread, own_checkpoint)


def _report(verdict: DeadlineVerdict, deadline_text: str, unread: int = 0, own_checkpoint: int | None = None
            ) -> str:
    text = verdict.message(deadline_text)
    if unread:
        own = "" if own_checkpoint is None else f" and this run's own (checkpoint {own_checkpoint})"
        text += (f"\n(read: the pipeline's newest {RECENT_CHECKPOINTS} checkpoints{own}; {unread} older "
                 "one(s) were not read, and a PREPARED one among them (another run's, a backfill's) is not "
                 f"named here: kafka-eos-txn checkpoints --manifest-base <store> --pipeline-id "
                 f"{verdict.pipeline_id} lists them all)")
    (log.error if verdict.at_risk else log.warning)("%s", text)
    return text
