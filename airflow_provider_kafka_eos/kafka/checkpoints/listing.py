"""What a manifest store holds, one row per checkpoint: status, input identity, run, records.

The view an operator needs to answer "was batch B1 written, by which run, is it committed?"
without opening JSON files: ``kafka-eos-txn checkpoints`` prints it. Reads only the
store (no Kafka). No Airflow imports.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import Manifest
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore

__all__ = ["COLUMNS", "checkpoint_row", "checkpoint_rows", "writers_note"]

COLUMNS = ("pipeline_id", "checkpoint_id", "status", "input", "reprocess_of", "run", "records",
           "transactions", "updated", "manifest")


def checkpoint_row(uri: str, manifest: Manifest) -> dict[str, Any]:
    """One checkpoint as a row (``input`` None: written before input identities, or without one)."""
    run = manifest.prepared_by
    records = [c.record_count for c in manifest.output_committables]
    return {
        "pipeline_id": manifest.pipeline_id,
        "checkpoint_id": manifest.checkpoint_id,
        "status": manifest.status.value,
        "input": manifest.input.id if manifest.input is not None else None,
        "reprocess_of": manifest.input.reprocess_of if manifest.input is not None else None,
        "run": run.run_id if run is not None else None,
        "dag_id": run.dag_id if run is not None else None,
        "records": sum(records) if None not in records else None,
        "transactions": len(manifest.committables),
        "updated": datetime.fromtimestamp(manifest.updated_at_ms / 1000, tz=timezone.utc)
        .strftime("%Y-%m-%dT%H:%M:%SZ"),
        "manifest": uri,
    }


def checkpoint_rows(
    store: ManifestStore, *, pipeline_id: str | None = None, input_id: str | None = None
) -> list[dict[str, Any]]:
    """Every checkpoint of the store (one pipeline, one input), oldest first per pipeline.

    Strict like every reader of the store: an unreadable store or manifest raises, naming it.
    """
    rows = [checkpoint_row(uri, m) for uri, m in store.manifests(pipeline_id)]
    if input_id is not None:
        rows = [r for r in rows if r["input"] == input_id]
    return rows


def writers_note(store: ManifestStore, pipeline_id: str | None = None) -> str:
    """``"; being written: ..."`` for each pipeline whose Spark job holds its writer lease now (the
    checkpoint it is preparing has no manifest yet, so no row shows it), ``""`` when none: the one
    place a terminal sees it, whatever the store (``kafka/checkpoints/writer_lease.py``)."""
    from airflow_provider_kafka_eos.kafka.checkpoints.writer_lease import described, live_lease, live_writers

    if pipeline_id is None:
        leases = sorted(live_writers(store).values(), key=lambda lease: lease.pipeline_id)
    else:
        leases = [lease for lease in (live_lease(store, pipeline_id),) if lease is not None]
    return "".join(f"; being written: pipeline {lease.pipeline_id} by {described(store, lease)}"
                   for lease in leases)
