"""Committed input waiting for a Kafka-input pipeline: how much, since when (the committed-input trigger).

A Kafka-input pipeline should run when *committed* input arrived past where its last COMMITTED
checkpoint ended, and not otherwise: an empty run still commits an offsets transaction, and a run
for input that a producer later aborts reads nothing. The high watermark cannot tell: aborted
records and transaction markers lie below it, an open transaction's records too. So:

- the **base** of each input partition is the ``to`` of the newest COMMITTED checkpoint that read it
  (the manifest store is the source of truth, as for the range planner), else the consumer group's
  committed offset (the offsets transaction moves it with every commit: a migrated consumer), else
  the log start;
- the **end** is the partition's last stable offset (ListOffsets LATEST under ``read_committed``):
  nothing at or past it may count, an open transaction holds it;
- what lies in between is **counted** with a ``read_committed`` consumer (aborted records and control
  batches are skipped by the client, as every downstream reader skips them), up to ``cap`` records.

One look is :func:`committed_backlog`; :func:`lso_snapshot` is the cheap poll the triggerer shares per
(bootstrap, topic). No Airflow imports: the trigger (``triggers/committed_input.py``) calls these
from a thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import Manifest, ManifestStatus
from airflow_provider_kafka_eos.kafka.errors import KafkaEosError

__all__ = ["Backlog", "committed_backlog", "committed_bases", "lso_snapshot"]

RUNBOOK = "input-lag"


@dataclass(frozen=True)
class Backlog:
    """Committed records past the bases (counted up to a cap) and the timestamp of the oldest one."""

    records: int
    oldest_ms: int | None
    bases: dict[int, int]  # partition -> base offset this count started at
    stable: dict[int, int]  # partition -> last stable offset

    def due(self, *, min_records: int, max_wait_s: float, now_ms: int) -> bool:
        """N committed records, or at least one that has waited T seconds."""
        if self.records >= min_records:
            return True
        waited = self.oldest_ms is not None and now_ms - self.oldest_ms >= max_wait_s * 1000
        return self.records > 0 and waited


def committed_bases(manifests: Sequence[Manifest], topic: str) -> dict[int, int]:
    """partition -> ``to`` of the newest COMMITTED checkpoint that read ``topic``'s partition."""
    found: dict[int, int] = {}
    for manifest in sorted(manifests, key=lambda m: m.checkpoint_id, reverse=True):
        kafka = manifest.input.kafka if manifest.input is not None else None
        if manifest.status is not ManifestStatus.COMMITTED or kafka is None:
            continue
        for r in kafka.ranges:
            if r.topic == topic and r.partition not in found:
                found[r.partition] = r.end
    return found


def _consumer(settings: Mapping[str, Any], group: str | None, factory: Callable[[dict], Any] | None) -> Any:
    config = {k: v for k, v in settings.items() if not k.startswith(("transaction", "enable.idempotence"))}
    config.update({
        "group.id": group or "kafka-eos-committed-input-probe",  # never joined: assign() only, no commit
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
    })
    if factory is not None:
        return factory(config)
    from confluent_kafka import Consumer

    return Consumer(config)


def lso_snapshot(settings: Mapping[str, Any], topic: str, *, timeout_s: float = 10.0,
                 consumer_factory: Callable[[dict], Any] | None = None) -> dict[int, int]:
    """partition -> last stable offset of ``topic`` (librdkafka's watermark under read_committed)."""
    from confluent_kafka import TopicPartition

    consumer = _consumer(settings, None, consumer_factory)
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is None or meta.error is not None:
            why = getattr(meta, "error", None) or "not found"
            raise KafkaEosError(f"input topic {topic!r} cannot be described ({why}): check the name and the "
                                "connection's READ/DESCRIBE rights", runbook=RUNBOOK)
        return {p: int(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[1])
                for p in sorted(meta.partitions)}
    finally:
        consumer.close()


def committed_backlog(
    settings: Mapping[str, Any],
    topic: str,
    stable: Mapping[int, int],
    bases: Mapping[int, int],
    *,
    group: str | None = None,
    cap: int = 1000,
    timeout_s: float = 30.0,
    consumer_factory: Callable[[dict], Any] | None = None,
) -> Backlog:
    """Count committed records of ``topic`` in ``[base, stable)`` per partition, at most ``cap``.

    ``bases`` missing a partition: the group's committed offset, else the log start. Reads stop at each
    partition's ``stable`` (the snapshot the caller polled), so input committed later is not counted now.
    """
    from confluent_kafka import KafkaError, TopicPartition

    consumer = _consumer(settings, group, consumer_factory)
    try:
        start = dict(bases)
        missing = [p for p in stable if p not in start]
        if missing and group:
            for tp in consumer.committed([TopicPartition(topic, p) for p in missing], timeout=timeout_s):
                if tp.offset >= 0:
                    start[tp.partition] = tp.offset
        for p in stable:
            if p not in start:
                start[p] = int(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[0])
        pending = {p for p, end in stable.items() if end > start[p]}
        records, oldest = 0, None
        if pending:
            consumer.assign([TopicPartition(topic, p, start[p]) for p in sorted(pending)])
        deadline = time.monotonic() + timeout_s
        while pending and records < cap:
            if time.monotonic() > deadline:
                raise KafkaEosError(f"counting committed input of {topic!r} took longer than "
                                    f"{timeout_s:.0f} s (partitions {sorted(pending)} not read up to their "
                                    "last stable offset)", runbook=RUNBOOK)
            for message in consumer.consume(num_messages=min(1000, cap - records), timeout=0.5):
                err, p, offset = message.error(), message.partition(), message.offset()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:  # at the LSO: nothing more to count
                        pending.discard(p)
                        continue
                    raise KafkaEosError(f"reading input {topic}-{p}: {err}", runbook=RUNBOOK)
                if p not in pending or offset >= stable[p]:
                    pending.discard(p)
                    continue
                records += 1
                stamp = message.timestamp()[1]
                if stamp is not None and stamp >= 0:
                    oldest = stamp if oldest is None else min(oldest, stamp)
                if offset + 1 >= stable[p]:
                    pending.discard(p)
        return Backlog(records=records, oldest_ms=oldest, bases=start, stable=dict(stable))
    finally:
        consumer.close()
