"""Exactly-once verification: read a topic as a consumer would and count every key.

Every data-path test ends here: a ``read_committed`` confluent-kafka consumer reads each
partition from the beginning up to the end offset *for its isolation level* (the last stable
offset for read_committed, the high watermark for read_uncommitted), and the report says which
expected keys are missing, which appear more than once, and which should not be there at all.

Kafka answers EndTxn before it writes the transaction markers, so right after a commit the
last stable offset may still stop short of the committed records. A read_committed count
therefore first waits (within its deadline) until no transaction is in PrepareCommit or
PrepareAbort; a transaction left open on purpose (Ongoing) does not make it wait.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


def _consumer_config(bootstrap_or_config: str | Mapping[str, Any], isolation: str) -> dict[str, Any]:
    if isinstance(bootstrap_or_config, str):
        config: dict[str, Any] = {"bootstrap.servers": bootstrap_or_config}
    else:
        config = dict(bootstrap_or_config)
    config.update(
        {
            # never commits; librdkafka just wants a group id
            "group.id": f"kafka-eos-verify-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "allow.auto.create.topics": False,
            # A partition whose log ends with a transaction marker is done only at its EOF, which
            # comes with an empty Fetch: the broker holds that one up to this long (500 ms default).
            "fetch.wait.max.ms": 10,
        }
    )
    return config


def count_keys(
    bootstrap_or_config: str | Mapping[str, Any],
    topic: str,
    *,
    isolation: str = "read_committed",
    timeout_s: float = 30.0,
) -> Counter[bytes]:
    """How often each key appears in ``topic`` as a consumer with ``isolation`` sees it.

    The end offsets are taken when the call starts: records written afterwards are not counted.
    Raises ``LookupError`` when the topic does not exist (a typo must not look like "nothing
    was written") and ``TimeoutError`` when the end offsets are not reached by the deadline.
    Records without a key count under ``b""``.
    """
    counts: Counter[bytes] = Counter()
    for message in _records(bootstrap_or_config, topic, isolation, timeout_s):
        key = message.key()
        counts[key if key is not None else b""] += 1
    return counts


def key_placement(
    bootstrap_or_config: str | Mapping[str, Any],
    topic: str,
    *,
    isolation: str = "read_committed",
    timeout_s: float = 30.0,
) -> Counter[tuple[bytes | None, int]]:
    """How often each (key, partition) pair appears, read as :func:`count_keys` reads (same rules).

    For tests of record placement (which partition a key landed in); null keys stay ``None``.
    """
    records = _records(bootstrap_or_config, topic, isolation, timeout_s)
    return Counter((m.key(), m.partition()) for m in records)


def committed_messages(bootstrap_or_config: str | Mapping[str, Any], topic: str, *,
                       timeout_s: float = 30.0) -> list[Any]:
    """Every record a ``read_committed`` consumer sees in ``topic`` (the confluent-kafka messages:
    key, value, headers), read as :func:`count_keys` reads (same rules); for tests that decode
    or compare values, not just count keys."""
    return list(_records(bootstrap_or_config, topic, "read_committed", timeout_s))


def _records(
    bootstrap_or_config: str | Mapping[str, Any], topic: str, isolation: str, timeout_s: float
) -> Iterator[Any]:
    """Every record (a confluent-kafka message) up to the end offsets taken at the start."""
    if isolation not in ISOLATION_LEVELS:
        raise ValueError(f"isolation must be one of {ISOLATION_LEVELS}, not {isolation!r}")
    deadline = time.monotonic() + timeout_s
    if isolation == "read_committed":
        _wait_for_markers(bootstrap_or_config, deadline)
    consumer = Consumer(_consumer_config(bootstrap_or_config, isolation))
    try:
        partitions = _partitions(consumer, topic, deadline)
        ends = {}
        for partition in partitions:
            # librdkafka's ListOffsets uses the consumer's isolation level: LSO or high watermark
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=max(0.1, deadline - time.monotonic())
            )
            ends[partition] = high
        pending = {p for p, end in ends.items() if end > 0}
        if not pending:
            return
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(pending)])
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                positions = {
                    tp.partition: tp.offset
                    for tp in consumer.position([TopicPartition(topic, p) for p in sorted(pending)])
                }
                wanted = {p: ends[p] for p in sorted(pending)}
                raise TimeoutError(
                    f"count_keys({topic!r}, {isolation}): after {timeout_s:.0f} s partitions "
                    f"{sorted(pending)} are at {positions}, short of their end offsets {wanted}"
                )
            # consume() waits out its whole timeout unless num_messages arrive: a short one, so a
            # count ends as soon as every partition reached its end (0.5 s cost 0.5 s every call)
            for message in consumer.consume(num_messages=10_000, timeout=min(remaining, 0.05)):
                partition, offset, error = message.partition(), message.offset(), message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if offset >= ends.get(partition, 0):
                            pending.discard(partition)
                        continue
                    if error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                        continue  # the throw-away group is never used: READ on the topic is enough
                    raise KafkaException(error)
                if offset >= ends[partition]:  # written after the snapshot: not part of this count
                    pending.discard(partition)
                    continue
                yield message
                if offset + 1 >= ends[partition]:
                    pending.discard(partition)
    finally:
        consumer.close()


def _wait_for_markers(bootstrap_or_config: str | Mapping[str, Any], deadline: float) -> None:
    """Poll ListTransactions until no transaction is completing (its markers are in flight).

    Best effort: a principal that may not list transactions, or a broker without
    ListTransactions, counts at once (the count then reflects the last stable offset as is).
    """
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from airflow_provider_kafka_eos.kafka.errors import KafkaEosError

    mapping = (
        {"bootstrap.servers": bootstrap_or_config}
        if isinstance(bootstrap_or_config, str)
        else dict(bootstrap_or_config)
    )
    try:
        with TransactionAdmin(KafkaClientConfig.from_mapping(mapping)) as admin:
            while admin.list(states=["PrepareCommit", "PrepareAbort"]) and time.monotonic() < deadline:
                time.sleep(0.05)
    except (KafkaEosError, KafkaException, OSError):
        return


def _partitions(consumer: Consumer, topic: str, deadline: float) -> list[int]:
    metadata = consumer.list_topics(topic, timeout=max(0.1, deadline - time.monotonic()))
    entry = metadata.topics.get(topic)
    if entry is None or entry.error is not None:
        raise LookupError(
            f"topic {topic!r} does not exist at {consumer_bootstrap(consumer)} "
            f"({entry.error if entry is not None else 'not in metadata'})"
        )
    return sorted(entry.partitions)


def consumer_bootstrap(consumer: Consumer) -> str:
    try:
        return ",".join(f"{b.host}:{b.port}" for b in consumer.list_topics(timeout=1).brokers.values())
    except KafkaException:
        return "the cluster"


@dataclass
class ExactlyOnceReport:
    """What a consumer saw against what it should have seen (each expected key exactly once)."""

    expected: int
    seen: int
    duplicates: dict[bytes, int] = field(default_factory=dict)
    missing: list[bytes] = field(default_factory=list)
    unexpected: dict[bytes, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.missing or self.unexpected)

    def render(self, limit: int = 10) -> str:
        def sample(items) -> str:
            items = list(items)
            shown = ", ".join(repr(i) for i in items[:limit])
            return shown + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")

        lines = [
            f"exactly-once {'OK' if self.ok else 'VIOLATED'}: expected {self.expected} keys once each, "
            f"saw {self.seen} records"
        ]
        if self.missing:
            lines.append(f"  missing ({len(self.missing)}): {sample(self.missing)}")
        if self.duplicates:
            lines.append(
                f"  duplicated ({len(self.duplicates)}): "
                f"{sample(f'{k!r} x{n}' for k, n in self.duplicates.items())}"
            )
        if self.unexpected:
            lines.append(
                f"  unexpected ({len(self.unexpected)}): "
                f"{sample(f'{k!r} x{n}' for k, n in self.unexpected.items())}"
            )
        return "\n".join(lines)


def _as_bytes(key: bytes | str) -> bytes:
    return key.encode() if isinstance(key, str) else bytes(key)


def exactly_once_report(
    counts: Mapping[bytes, int], expected_keys: Iterable[bytes | str]
) -> ExactlyOnceReport:
    expected = {_as_bytes(k) for k in expected_keys}
    return ExactlyOnceReport(
        expected=len(expected),
        seen=sum(counts.values()),
        duplicates={k: n for k, n in sorted(counts.items()) if k in expected and n > 1},
        missing=sorted(k for k in expected if counts.get(k, 0) == 0),
        unexpected={k: n for k, n in sorted(counts.items()) if k not in expected and n > 0},
    )


def assert_exactly_once(
    counts: Mapping[bytes, int], expected_keys: Iterable[bytes | str]
) -> ExactlyOnceReport:
    """AssertionError with the rendered report unless every expected key appears exactly once."""
    report = exactly_once_report(counts, expected_keys)
    if not report.ok:
        raise AssertionError(report.render())
    return report
