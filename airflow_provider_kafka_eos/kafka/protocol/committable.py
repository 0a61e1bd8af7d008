"""Committable: everything a later process needs to finish one prepared Kafka transaction.

A Spark task leaves its transaction open and hands one of these to the driver; the commit
task sends EndTxn with exactly this producer id / epoch. Unlike Flink's committable we also
store the transaction protocol version and the EndTxn request version, because under
Kafka 4's TV2 a commit with the wrong EndTxn version breaks recovery (flink-connector-kafka
PR #321). Nothing here is secret: committables are written to manifests and XComs.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import ManifestError, UsageError
from airflow_provider_kafka_eos.kafka.validation import validate_transactional_id

__all__ = ["Committable", "TopicPartition"]


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition}

    @classmethod
    def from_dict(
        cls, data: Any, *, source: str = "committable", field: str = "partitions"
    ) -> TopicPartition:
        if not isinstance(data, Mapping):
            raise ManifestError(
                f"{source}: field {field!r} must be an object with topic and partition, "
                f"got {type(data).__name__}"
            )
        reject_unknown(data, {"topic", "partition"}, source, field)
        topic = require_field(data, "topic", str, source, f"{field}.topic")
        partition = require_field(data, "partition", int, source, f"{field}.partition")
        if not topic:
            raise ManifestError(f"{source}: field {field}.topic must not be empty")
        if partition < 0:
            raise ManifestError(f"{source}: field {field}.partition must be >= 0, got {partition}")
        return cls(topic, partition)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


_FIELDS: dict[str, type | tuple[type, ...]] = {
    "transactional_id": str,
    "producer_id": int,
    "producer_epoch": int,
    "partitions": list,
    "record_count": int,
    "prepared_at_ms": int,
    "transaction_start_ms": int,
    "transaction_timeout_ms": int,
    "transaction_version": int,
    "end_txn_version": int,
    "two_phase": bool,
    "first_offsets": list,
}
_OPTIONAL = {"two_phase", "first_offsets"}
# Where the committable being constructed came from (a manifest uri + index), for error messages.
_SOURCE: ContextVar[str] = ContextVar("committable_source", default="committable")


@dataclass(frozen=True)
class Committable:
    """One prepared (Ongoing, flushed, non-empty) transaction, identified by id + producer id/epoch."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    # None only for a committable built by hand from (id, producer id, epoch), e.g. a manual
    # commit: nobody counted its records. A manifest always holds a positive count (from_dict
    # requires an int, and write_manifest validates by a round trip).
    record_count: int | None
    prepared_at_ms: int  # wall clock when the task verified the transaction
    transaction_start_ms: int  # coordinator's txnStartTimestamp (DescribeTransactions)
    transaction_timeout_ms: int
    transaction_version: int  # 1 or 2: the cluster's finalized transaction.version at prepare
    end_txn_version: int  # the EndTxn request version the commit must use
    two_phase: bool = False
    # The offset of the transaction's first record on each partition (from the producer's own
    # acknowledgements), where it is known. It is what lets a later reader ask the *data* whether
    # this transaction was committed or aborted (the partition's aborted-transaction index and
    # last stable offset) after the coordinator has forgotten the producer id/epoch: a TV2
    # rotation at the epoch limit, a reuse of the id (``kafka/admin/verdict.py``). Empty for a
    # committable built by hand from (id, producer id, epoch).
    first_offsets: tuple[tuple[TopicPartition, int], ...] = ()

    def __post_init__(self) -> None:
        # Accept any iterable of TopicPartition (or (topic, partition) pairs) but store a sorted tuple,
        # so equal committables compare and serialise equal.
        parts = tuple(
            sorted(p if isinstance(p, TopicPartition) else TopicPartition(*p) for p in self.partitions)
        )
        object.__setattr__(self, "partitions", parts)
        offsets = self.first_offsets
        offsets = offsets.items() if isinstance(offsets, Mapping) else offsets
        object.__setattr__(self, "first_offsets", tuple(sorted(
            (tp if isinstance(tp, TopicPartition) else TopicPartition(*tp), int(offset))
            for tp, offset in offsets
        )))
        self.validate(_SOURCE.get())

    def first_offset(self, partition: TopicPartition) -> int | None:
        """Where this transaction's records begin on ``partition``, if the producer recorded it."""
        return dict(self.first_offsets).get(partition)

    @property
    def records_text(self) -> str:
        """For messages: "250 record(s)", or that nobody counted them."""
        return "record count unknown" if self.record_count is None else f"{self.record_count} record(s)"

    @property
    def deadline_ms(self) -> int:
        """When the coordinator will abort this transaction (coordinator clock)."""
        return self.transaction_start_ms + self.transaction_timeout_ms

    def validate(self, source: str = "committable") -> None:
        """Raise ManifestError when a field is out of range; a committable that cannot be committed
        must fail where it is created, not at commit time."""
        if not self.transactional_id:
            raise ManifestError(f"{source}: field 'transactional_id' must not be empty")
        try:  # one rule for what Kafka can carry (kafka/validation.py); before the id is printed
            validate_transactional_id(self.transactional_id, field="field 'transactional_id'")
        except UsageError as exc:
            raise ManifestError(f"{source}: {exc.cause}") from None
        where = f"{source} ({self.transactional_id})"
        if self.producer_id < 0:
            raise ManifestError(f"{where}: field 'producer_id' must be >= 0, got {self.producer_id}")
        if not 0 <= self.producer_epoch <= 32767:
            raise ManifestError(
                f"{where}: field 'producer_epoch' must be in 0..32767, got {self.producer_epoch}"
            )
        if not self.partitions:
            raise ManifestError(
                f"{where}: field 'partitions' must not be empty (an empty transaction has no committable)"
            )
        if self.record_count is not None and self.record_count <= 0:
            raise ManifestError(f"{where}: field 'record_count' must be > 0, got {self.record_count}")
        if self.transaction_timeout_ms <= 0:
            raise ManifestError(f"{where}: field 'transaction_timeout_ms' must be > 0")
        if self.transaction_version not in (1, 2):
            raise ManifestError(
                f"{where}: field 'transaction_version' must be 1 or 2, got {self.transaction_version}"
            )
        if not 0 <= self.end_txn_version <= 5:
            raise ManifestError(
                f"{where}: field 'end_txn_version' must be in 0..5, got {self.end_txn_version}"
            )
        if self.transaction_version == 2 and self.end_txn_version < 5:
            raise ManifestError(
                f"{where}: transaction_version 2 needs end_txn_version 5, got {self.end_txn_version}"
            )
        if self.transaction_version == 1 and self.end_txn_version >= 5:
            raise ManifestError(
                f"{where}: transaction_version 1 needs end_txn_version <= 4, got {self.end_txn_version}"
            )
        for tp, offset in self.first_offsets:
            if tp not in self.partitions:
                raise ManifestError(
                    f"{where}: field 'first_offsets' names {tp}, which is not in 'partitions'")
            if offset < 0:
                raise ManifestError(f"{where}: field 'first_offsets' for {tp} must be >= 0, got {offset}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "transactional_id": self.transactional_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "partitions": [p.to_dict() for p in self.partitions],
            "record_count": self.record_count,
            "prepared_at_ms": self.prepared_at_ms,
            "transaction_start_ms": self.transaction_start_ms,
            "transaction_timeout_ms": self.transaction_timeout_ms,
            "transaction_version": self.transaction_version,
            "end_txn_version": self.end_txn_version,
            "two_phase": self.two_phase,
            "first_offsets": [{**tp.to_dict(), "offset": offset} for tp, offset in self.first_offsets],
        }

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "committable") -> Committable:
        """Strictly parse: every required field present with its JSON type, no unknown fields.

        ``source`` names where the data came from (a manifest uri and index) in error messages.
        """
        if not isinstance(data, Mapping):
            raise ManifestError(f"{source}: a committable must be an object, got {type(data).__name__}")
        reject_unknown(data, set(_FIELDS), source, "")
        values: dict[str, Any] = {}
        for name, kind in _FIELDS.items():
            if name in _OPTIONAL and name not in data:
                continue
            values[name] = require_field(data, name, kind, source, name)
        values["partitions"] = tuple(
            TopicPartition.from_dict(p, source=source, field=f"partitions[{i}]")
            for i, p in enumerate(values["partitions"])
        )
        if "first_offsets" in values:
            values["first_offsets"] = tuple(
                _first_offset(row, source, f"first_offsets[{i}]")
                for i, row in enumerate(values["first_offsets"])
            )
        token = _SOURCE.set(source)
        try:
            return cls(**values)
        finally:
            _SOURCE.reset(token)

    def __str__(self) -> str:
        return (
            f"{self.transactional_id} (producer id {self.producer_id}, epoch {self.producer_epoch}, "
            f"{len(self.partitions)} partition(s), {self.records_text})"
        )


def _first_offset(row: Any, source: str, field: str) -> tuple[TopicPartition, int]:
    if not isinstance(row, Mapping):
        raise ManifestError(f"{source}: field {field!r} must be an object, got {type(row).__name__}")
    reject_unknown(row, {"topic", "partition", "offset"}, source, field)
    partition = TopicPartition.from_dict({k: v for k, v in row.items() if k != "offset"}, source=source,
                                         field=field)
    return partition, require_field(row, "offset", int, source, f"{field}.offset")


def require_field(data: Mapping, name: str, kind: type | tuple[type, ...], source: str, field: str) -> Any:
    if name not in data:
        raise ManifestError(f"{source}: required field {field!r} is missing")
    value = data[name]
    # bool is an int in Python; a JSON true where a number belongs is a defect, not a 1.
    if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
        expected = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ManifestError(f"{source}: field {field!r} must be {expected}, got {type(value).__name__}")
    return value


def reject_unknown(data: Mapping, known: set[str], source: str, field: str) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        where = f" in {field!r}" if field else ""
        raise ManifestError(
            f"{source}: unknown field {unknown[0]!r}{where} (known: {', '.join(sorted(known))})"
        )
