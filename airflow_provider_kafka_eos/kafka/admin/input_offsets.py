"""What Kafka says about a pipeline's input topics right now: partitions, earliest, last stable offsets.

The range planner (``kafka/checkpoints/input_ranges.py``) is pure; this module asks the cluster
for the facts it needs, through the one wire seam (``kafka/protocol/wire.py``), every request
bounded by the wire's timeouts:

- the input topics' partitions (Metadata); a topic the cluster does not have is reported as
  missing, not raised, so the planner can say which recorded range is gone;
- per partition the earliest offset (ListOffsets EARLIEST: the log start, which retention moves)
  and the **last stable offset** (ListOffsets LATEST under ``read_committed``): a checkpoint's
  ``to`` is never past a transaction that might still abort;
- for a first checkpoint only: the offsets at a timestamp, or the group's committed offsets.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.consumer import ListOffsetsRequest
from kafka.structs import TopicPartition as KafkaTopicPartition

from airflow_provider_kafka_eos.kafka.errors import KafkaEosError
from airflow_provider_kafka_eos.kafka.protocol.error_codes import error_name
from airflow_provider_kafka_eos.kafka.protocol.wire import WireOwner

__all__ = ["InputOffsets", "read_input_offsets"]

LATEST = -1
EARLIEST = -2
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
RUNBOOK = "input-offsets"


@dataclass(frozen=True)
class InputOffsets:
    """One look at the input topics (what the planner needs; nothing is read from the topics)."""

    earliest: dict[tuple[str, int], int]
    stable: dict[tuple[str, int], int]  # last stable offset (read_committed LATEST)
    missing_topics: frozenset[str] = frozenset()
    at_start: dict[tuple[str, int], int] = field(default_factory=dict)  # a first checkpoint's start offsets

    @property
    def partitions(self) -> set[tuple[str, int]]:
        return set(self.stable)


def read_input_offsets(
    admin: WireOwner, topics: Sequence[str], *, start: Any = None, group: str | None = None,
) -> InputOffsets:
    """Earliest and last stable offset of every partition of ``topics``; with ``start`` (a
    ``StartChoice``) also where a first checkpoint starts. ``admin``: an open ``TransactionAdmin``."""
    wire = admin.wire
    missing: set[str] = set()
    parts: list[tuple[str, int]] = []
    for topic in wire.admin.describe_topics(list(topics)):
        if topic.get("error_code"):
            missing.add(topic["name"])
            continue
        parts.extend((topic["name"], p["partition_index"]) for p in topic["partitions"])
    earliest = _list(wire, parts, EARLIEST, READ_UNCOMMITTED)
    stable = _list(wire, parts, LATEST, READ_COMMITTED)
    at_start: dict[tuple[str, int], int] = {}
    if start is not None and parts:
        if start.kind == "earliest":
            at_start = dict(earliest)
        elif start.kind == "latest":
            at_start = dict(stable)
        elif start.kind == "timestamp":
            found = _list(wire, parts, int(start.timestamp_ms), READ_COMMITTED)
            # No record at or after the timestamp: start at the end (what Kafka's consumers do).
            at_start = {p: (o if o >= 0 else stable[p]) for p, o in found.items()}
        elif start.kind == "group":
            at_start = group_offsets(admin, group or "", parts)
    return InputOffsets(earliest, stable, frozenset(missing), at_start)


def group_offsets(
    admin: WireOwner, group: str, parts: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    """The group's committed offsets of ``parts`` (OffsetFetch); a partition without one is absent."""
    wanted = [KafkaTopicPartition(t, p) for t, p in parts]
    try:
        answer = admin.wire.admin.list_group_offsets({group: wanted})
    except KafkaEosError:
        raise
    except Exception as exc:
        raise KafkaEosError(f"the committed offsets of consumer group {group!r} cannot be read "
                            f"({type(exc).__name__}: {exc})", runbook=RUNBOOK) from None
    found = answer.get(group, {}) if isinstance(answer, Mapping) else {}
    return {(tp.topic, tp.partition): int(meta.offset) for tp, meta in found.items()
            if meta is not None and int(meta.offset) >= 0}


def _list(wire: Any, parts: Sequence[tuple[str, int]], timestamp: int,
          isolation: int) -> dict[tuple[str, int], int]:
    if not parts:
        return {}
    leaders = wire.leaders([KafkaTopicPartition(t, p) for t, p in parts])
    by_leader: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for t, p in parts:
        by_leader[leaders[KafkaTopicPartition(t, p)]].append((t, p))
    batch = [(_request(tps, timestamp, isolation), node) for node, tps in sorted(by_leader.items())]
    found: dict[tuple[str, int], int] = {}
    for response in wire.send_all(batch):
        for topic in response.topics:
            for row in topic.partitions:
                if row.error_code:
                    raise KafkaEosError(f"ListOffsets failed for input partition {topic.name}-"
                                        f"{row.partition_index} with {error_name(row.error_code)}",
                                        runbook=RUNBOOK)
                found[(topic.name, row.partition_index)] = int(row.offset)
    return found


def _request(tps: Sequence[tuple[str, int]], timestamp: int, isolation: int) -> Any:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for t, p in tps:
        by_topic[t].append(p)
    topics = [
        ListOffsetsRequest.ListOffsetsTopic(
            name=topic,
            partitions=[ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=i, timestamp=timestamp, current_leader_epoch=-1) for i in sorted(indexes)],
        )
        for topic, indexes in sorted(by_topic.items())
    ]
    return ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=topics, min_version=2)
