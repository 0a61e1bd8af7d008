"""A manifest store with a pipeline's history, written directly (no Kafka): for the console's tests.

The console reads manifests and the LSO history files; what is in them is all it plots. A real
run writes one manifest per checkpoint through the Spark job (seconds each); 10,000 of them here
take a second or two, written as the store's own JSON (``Manifest.to_json``, the same bytes a
run writes). Checkpoint ``i`` (1-based) was prepared at ``start_ms + i * step_ms`` with ``i``
records; every ``given_up_every``-th was given up (ABORTED after an abort decision); the last
``open_count`` are still PREPARED; the rest COMMITTED ``latency_ms(i)`` after they were prepared.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from urllib.parse import urlparse

from airflow_provider_kafka_eos.kafka.checkpoints.identity import InputRecord, RunIdentity
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import Decision, Manifest, ManifestStatus
from airflow_provider_kafka_eos.kafka.operations.lso_history import HISTORY_DIR
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, TopicPartition

__all__ = ["console_manifest", "write_console_store", "write_lag_history"]


def console_manifest(pipeline: str, topic: str, i: int, *, prepared_ms: int, status: ManifestStatus,
                     decision: Decision | None) -> Manifest:
    committable = Committable(
        transactional_id=f"{pipeline}-0-{i}", producer_id=1000 + i, producer_epoch=0,
        partitions=(TopicPartition(topic, 0),), record_count=i, prepared_at_ms=prepared_ms,
        transaction_start_ms=prepared_ms - 500, transaction_timeout_ms=900_000,
        transaction_version=2, end_txn_version=5,
    )
    return Manifest(
        pipeline_id=pipeline, checkpoint_id=i, transactional_id_prefix=pipeline,
        naming_strategy="INCREMENTING", topic=topic, status=status, committables=[committable],
        created_at_ms=prepared_ms, updated_at_ms=decision.at_ms if decision else prepared_ms,
        prepared_by=RunIdentity("eos_pipeline", f"manual__batch-{i}", 1),
        input=InputRecord(f"batch-{i:05d}"), decision=decision,
    )


def write_console_store(base_uri: str, pipeline: str, topic: str, count: int, *, start_ms: int,
                        step_ms: int = 60_000, given_up_every: int = 0, open_count: int = 0,
                        latency_ms: Callable[[int], int] = lambda i: 1000 + 10 * i) -> pathlib.Path:
    """Write ``count`` manifests of ``pipeline`` under a local ``file://`` store; returns its folder."""
    folder = pathlib.Path(urlparse(base_uri).path) / pipeline
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(1, count + 1):
        prepared = start_ms + i * step_ms
        if given_up_every and i % given_up_every == 0:
            status, decision = ManifestStatus.ABORTED, Decision("abort", "test give-up", prepared + 5_000)
        elif i > count - open_count:
            status, decision = ManifestStatus.PREPARED, None
        else:
            status, decision = ManifestStatus.COMMITTED, Decision("commit", "test", prepared + latency_ms(i))
        manifest = console_manifest(pipeline, topic, i, prepared_ms=prepared, status=status,
                                    decision=decision)
        (folder / f"checkpoint-{i:012d}.json").write_text(manifest.to_json())
    return folder


def write_lag_history(base_uri: str, topic: str, samples: list[dict[str, int]]) -> None:
    """An LSO history file as the sensor's polls leave it (``kafka/operations/lso_history.py``)."""
    folder = pathlib.Path(urlparse(base_uri).path) / HISTORY_DIR
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{topic}.json").write_text(json.dumps({"topic": topic, "samples": samples}))
