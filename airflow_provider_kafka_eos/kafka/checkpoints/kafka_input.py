"""Kafka as a checkpoint's input: the offset range each partition contributes, as the manifest records it.

A pipeline that reads Kafka must read every input record into exactly one COMMITTED checkpoint.
So the input is not "whatever the job's source reads now" but a range per partition
``[from, to)`` fixed *before* anything is read, recorded with the checkpoint, and read again
unchanged by every retry of it. This module is only the value and its strict JSON form
(manifest schema 4, ``input.kafka``); ``input_ranges.py`` owns how a range is chosen.

Nothing here is secret: topics, a group name, offsets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import ManifestError, UsageError
from airflow_provider_kafka_eos.kafka.protocol.verdicts import GroupEffect
from airflow_provider_kafka_eos.kafka.validation import validate_topic

__all__ = ["START_CHOICES", "KafkaInput", "PartitionRange", "SkippedRange", "StartChoice"]

# How the first checkpoint of a pipeline (no COMMITTED checkpoint with a Kafka input yet) starts.
START_CHOICES = ("group", "earliest", "latest", "timestamp")


@dataclass(frozen=True)
class StartChoice:
    """Where a pipeline's first checkpoint starts reading: a choice the user makes explicitly.

    ``group``: the consumer group's committed offsets (migrating from an existing consumer; a
    partition the group never committed is refused, never guessed); ``earliest``; ``latest``;
    ``timestamp``: the first offset at or after ``timestamp_ms`` per partition.
    """

    kind: str
    timestamp_ms: int | None = None

    @classmethod
    def parse(cls, text: Any, *, field: str = "input_start") -> StartChoice:
        """``group`` | ``earliest`` | ``latest`` | ``timestamp:<epoch ms>``; anything else is refused."""
        if isinstance(text, StartChoice):
            return text
        value = str(text or "").strip()
        kind, sep, rest = value.partition(":")
        if kind == "timestamp" and sep:
            try:
                stamp = int(rest)
            except ValueError:
                stamp = -1
            if stamp < 0:
                raise UsageError(f"{field}={value!r}: a timestamp start is 'timestamp:<epoch milliseconds>', "
                                 "e.g. timestamp:1767225600000")
            return cls("timestamp", stamp)
        if kind in ("group", "earliest", "latest") and not sep:
            return cls(kind)
        raise UsageError(f"{field}={value!r} is not a start choice: use one of group, earliest, latest, "
                         "timestamp:<epoch ms> (where the pipeline's first checkpoint starts reading)")

    def __str__(self) -> str:
        return f"timestamp:{self.timestamp_ms}" if self.kind == "timestamp" else self.kind


@dataclass(frozen=True, order=True)
class PartitionRange:
    """Offsets ``[start, end)`` of one partition (``from`` / ``to`` in JSON); empty when equal."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def empty(self) -> bool:
        return self.end <= self.start

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "from": self.start, "to": self.end}

    @classmethod
    def from_dict(cls, data: Any, *, source: str, field: str) -> PartitionRange:
        values = _strict(data, {"topic": str, "partition": int, "from": int, "to": int}, source, field)
        if values["partition"] < 0 or values["from"] < 0 or values["to"] < values["from"]:
            raise ManifestError(f"{source}: field {field!r} must have partition >= 0 and 0 <= from <= "
                                f"to, got "
                                f"{data!r}")
        return cls(values["topic"], values["partition"], values["from"], values["to"])

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition} [{self.start}, {self.end})"


@dataclass(frozen=True, order=True)
class SkippedRange:
    """A range the pipeline was told to skip (opt-in) because Kafka no longer has it."""

    topic: str
    partition: int
    start: int
    end: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "from": self.start, "to": self.end,
                "reason": self.reason}

    @classmethod
    def from_dict(cls, data: Any, *, source: str, field: str) -> SkippedRange:
        values = _strict(data, {"topic": str, "partition": int, "from": int, "to": int, "reason": str},
                         source, field)
        return cls(values["topic"], values["partition"], values["from"], values["to"], values["reason"])


@dataclass(frozen=True)
class KafkaInput:
    """What a checkpoint reads from Kafka, fixed before it reads (``input.kafka`` in the manifest).

    ``based_on``: the COMMITTED checkpoint whose ``to`` offsets are this one's ``from`` (None for
    a pipeline's first checkpoint, which started at ``start``). ``offsets_transactional_id``: the
    transaction that moves ``group``'s committed offsets to ``to`` together with the output.
    """

    topics: tuple[str, ...]
    group: str
    start: str
    ranges: tuple[PartitionRange, ...]
    based_on: int | None = None
    planned_at_ms: int = 0
    skipped: tuple[SkippedRange, ...] = ()
    offsets_transactional_id: str | None = None
    _by_partition: dict[tuple[str, int], PartitionRange] = field(default_factory=dict, compare=False,
                                                                 repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", tuple(sorted(set(self.topics))))
        object.__setattr__(self, "ranges", tuple(sorted(self.ranges)))
        object.__setattr__(self, "skipped", tuple(sorted(self.skipped)))
        object.__setattr__(self, "_by_partition", {(r.topic, r.partition): r for r in self.ranges})

    @property
    def records_upper_bound(self) -> int:
        """Offsets in the ranges (control records and aborted records included: an upper bound)."""
        return sum(r.end - r.start for r in self.ranges)

    def range_of(self, topic: str, partition: int) -> PartitionRange | None:
        return self._by_partition.get((topic, partition))

    def group_effect(self) -> GroupEffect:
        """What the offsets transaction does to the group when it commits: each range's ``from`` to ``to``."""
        return GroupEffect(self.group, tuple((r.topic, r.partition, r.start, r.end) for r in self.ranges))

    def end_offsets(self) -> dict[tuple[str, int], int]:
        """Partition -> ``to``: what the group's offsets become when the checkpoint commits."""
        return {(r.topic, r.partition): r.end for r in self.ranges}

    def spark_offsets(self) -> tuple[str, str]:
        """(startingOffsets, endingOffsets) JSON for Spark's Kafka source: exactly these ranges."""
        import json

        starting: dict[str, dict[str, int]] = {}
        ending: dict[str, dict[str, int]] = {}
        for r in self.ranges:
            starting.setdefault(r.topic, {})[str(r.partition)] = r.start
            ending.setdefault(r.topic, {})[str(r.partition)] = r.end
        return json.dumps(starting, sort_keys=True), json.dumps(ending, sort_keys=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topics": list(self.topics),
            "group": self.group,
            "start": self.start,
            "ranges": [r.to_dict() for r in self.ranges],
            "based_on": self.based_on,
            "planned_at_ms": self.planned_at_ms,
            "skipped": [s.to_dict() for s in self.skipped],
            "offsets_transactional_id": self.offsets_transactional_id,
        }

    @classmethod
    def from_dict(cls, data: Any, *, source: str, field: str = "input.kafka") -> KafkaInput:
        values = _strict(data, {"topics": list, "group": str, "start": str, "ranges": list,
                                "based_on": (int, type(None)), "planned_at_ms": int, "skipped": list,
                                "offsets_transactional_id": (str, type(None))}, source, field)
        topics = values["topics"]
        try:
            for t in topics:
                validate_topic(t, field=f"field {field}.topics")
            StartChoice.parse(values["start"], field=f"field {field}.start")
        except UsageError as exc:
            raise ManifestError(f"{source}: {exc.cause}") from None
        if not values["group"]:
            raise ManifestError(f"{source}: field {field}.group must not be empty")
        ranges = tuple(PartitionRange.from_dict(r, source=source, field=f"{field}.ranges[{i}]")
                       for i, r in enumerate(values["ranges"]))
        seen: set[tuple[str, int]] = set()
        for r in ranges:
            if r.topic not in topics:
                raise ManifestError(f"{source}: {field} range {r} names a topic not in {field}.topics")
            if (r.topic, r.partition) in seen:
                raise ManifestError(f"{source}: {field} lists partition {r.topic}-{r.partition} twice")
            seen.add((r.topic, r.partition))
        skipped = tuple(SkippedRange.from_dict(s, source=source, field=f"{field}.skipped[{i}]")
                        for i, s in enumerate(values["skipped"]))
        return cls(tuple(topics), values["group"], values["start"], ranges, values["based_on"],
                   values["planned_at_ms"], skipped, values["offsets_transactional_id"])


def _strict(data: Any, kinds: Mapping[str, Any], source: str, field: str) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise ManifestError(f"{source}: field {field!r} must be an object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(kinds))
    if unknown:
        raise ManifestError(f"{source}: unknown field {unknown[0]!r} in {field!r} (known: "
                            f"{', '.join(sorted(kinds))})")
    values = {}
    for name, kind in kinds.items():
        if name not in data:
            raise ManifestError(f"{source}: required field '{field}.{name}' is missing")
        value = data[name]
        if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
            raise ManifestError(f"{source}: field '{field}.{name}' has the wrong type "
                                f"({type(value).__name__})")
        values[name] = value
    return values
