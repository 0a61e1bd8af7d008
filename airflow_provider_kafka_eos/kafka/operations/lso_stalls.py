"""LSO stalls: partitions whose last stable offset is pinned by an open transaction.

Listing transactions cannot see every blocker (producers outside our prefixes, clusters without
ListTransactions): a partition whose last stable offset stays put while data piles up behind it
is found here from its offsets alone, naming the producer that holds it open
(:func:`find_lso_stalls`, remembered across polls by :class:`LsoStallTracker`). The sensor's
scan (``classify.py``) reports them with the lingering transactions.

No Airflow imports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from airflow_provider_kafka_eos.kafka.checkpoints.store import PreparedRef
from airflow_provider_kafka_eos.kafka.operations.classify import (
    RUNBOOK_INPUT_LAG,
    RUNBOOK_LSO,
    FindingKind,
    classify_one,
    now_ms,
)
from airflow_provider_kafka_eos.runbook import reference as runbook_reference


class ProbingAdmin(Protocol):
    """What an LSO poll needs of the admin handed in (a TransactionAdmin): the LSO probe, and its
    wire to expand a whole topic into its partitions."""

    wire: Any

    def lso_probe(self, topic_partitions: Iterable[Any]) -> list[Any]: ...


@dataclass(frozen=True)
class LsoStall:
    """A partition whose read_committed consumers cannot get past ``last_stable_offset``.

    ``stalled_since_ms`` is the earliest moment from which the LSO is known to have been at or
    below its current value: the first time a poll saw this LSO (the LSO never moves back), or
    the blocking producer's last write if that is earlier (its transaction was open from then
    on, starting at the LSO). Producer timestamps are the client's clock.
    """

    topic: str
    partition: int
    last_stable_offset: int
    high_watermark: int
    stalled_since_ms: int
    stalled_for_ms: int
    blocking_producer_id: int | None
    blocking_producer_epoch: int | None
    txn_start_offset: int | None
    transactional_id: str | None
    kind: FindingKind
    reason: str
    source: str = "lso-stall"
    # A partition of a pipeline's input topic (the sensor's ``input_topics``): the pipeline's
    # checkpoints end at this LSO, so the stall holds the pipeline back (``input_stalls.py``).
    pipeline_input: bool = False
    txn_started_ms: int | None = None  # the blocking transaction's start, per its coordinator

    @property
    def runbook(self) -> str:
        return runbook_reference(RUNBOOK_INPUT_LAG if self.pipeline_input else RUNBOOK_LSO)

    @property
    def next_step(self) -> str:
        if not self.transactional_id:
            return "identify the producer"
        if self.pipeline_input and self.kind is FindingKind.FOREIGN:
            return (f"have {self.transactional_id} ended by its owner, or abort it "
                    f"(runbook {RUNBOOK_INPUT_LAG})")
        return self.kind.next_step

    @property
    def label(self) -> str:
        return f"{'input-stall' if self.pipeline_input else 'lso-stall'}/{self.kind.value}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["kind"] = self.kind.value
        data["next_step"] = self.next_step
        data["runbook"] = self.runbook
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LsoStall:
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        fields["kind"] = FindingKind(data["kind"])
        return cls(**fields)


@dataclass(frozen=True)
class ProducerState:
    """One active producer on a partition (DescribeProducers), the part a stall needs."""

    producer_id: int
    producer_epoch: int
    last_timestamp_ms: int
    current_txn_start_offset: int


@dataclass(frozen=True)
class PartitionOffsets:
    """One poll of a partition: both isolation levels' LATEST offsets and its producers."""

    topic: str
    partition: int
    last_stable_offset: int
    high_watermark: int
    producers: tuple[ProducerState, ...] = ()

    def blocking_producer(self) -> ProducerState | None:
        """The producer whose open transaction starts at the LSO (that is what pins it)."""
        for producer in self.producers:
            if producer.current_txn_start_offset >= 0 and (
                producer.current_txn_start_offset == self.last_stable_offset
            ):
                return producer
        return None


@dataclass
class LsoStallTracker:
    """Remembers when each partition was first seen at its current LSO and high watermark.

    Keep one alive across polls (the poke-mode sensor and the trigger do) to measure "the LSO
    has not moved while the high watermark has"; a fresh tracker falls back on the blocking
    producer's last-write time. State is JSON-able so a caller can carry it between runs.
    """

    seen: dict[str, dict[str, int]] = field(default_factory=dict)

    def observe(self, offsets: PartitionOffsets, at_ms: int) -> tuple[int, bool]:
        """Record a poll; return (first time seen at this LSO, whether the HW moved since)."""
        key = f"{offsets.topic}-{offsets.partition}"
        entry = self.seen.get(key)
        if entry is None or entry["lso"] != offsets.last_stable_offset:
            entry = {"lso": offsets.last_stable_offset, "since_ms": at_ms, "hw": offsets.high_watermark}
            self.seen[key] = entry
        return entry["since_ms"], offsets.high_watermark > entry["hw"]

    def to_dict(self) -> dict[str, Any]:
        return {"seen": self.seen}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> LsoStallTracker:
        return cls(seen={k: dict(v) for k, v in ((data or {}).get("seen") or {}).items()})


def find_lso_stalls(
    polls: Iterable[PartitionOffsets],
    *,
    min_stall_ms: int,
    tracker: LsoStallTracker,
    producer_transactions: Mapping[int, str],
    owned_prefixes: Sequence[str],
    prepared: Mapping[str, PreparedRef],
    writing: Mapping[str, str] | None = None,
    at_ms: int | None = None,
) -> list[LsoStall]:
    """Partitions pinned at their LSO for at least ``min_stall_ms`` with data behind it.

    ``producer_transactions`` maps producer id -> transactional id (from ListTransactions);
    a blocking producer it cannot name is reported as foreign, since we cannot prove it is ours.
    ``writing``: the live writers (``classify.classify_one``).
    """
    at_ms = now_ms() if at_ms is None else at_ms
    stalls = []
    for poll in polls:
        first_seen_ms, hw_moved = tracker.observe(poll, at_ms)
        if poll.high_watermark <= poll.last_stable_offset:
            continue  # nothing is held back from read_committed consumers
        blocker = poll.blocking_producer()
        since_ms = first_seen_ms
        if blocker is not None and 0 <= blocker.last_timestamp_ms < since_ms:
            since_ms = blocker.last_timestamp_ms
        stalled_for = at_ms - since_ms
        if stalled_for < min_stall_ms:
            continue
        behind = poll.high_watermark - poll.last_stable_offset
        detail = (
            f"LSO {poll.last_stable_offset} behind high watermark {poll.high_watermark} ({behind} records)"
        )
        if hw_moved:
            detail += "; the high watermark moved while the LSO did not"
        if blocker is None:
            transactional_id = None
            kind, reason = FindingKind.FOREIGN, f"{detail}; no producer with an open transaction at the LSO"
        else:
            transactional_id = producer_transactions.get(blocker.producer_id)
            if transactional_id is None:
                kind = FindingKind.FOREIGN
                reason = (
                    f"{detail}; blocked by producer {blocker.producer_id} epoch {blocker.producer_epoch}, "
                    "whose transactional id is unknown (not listed, or the cluster lacks ListTransactions)"
                )
            else:
                kind, why, _ = classify_one(
                    transactional_id,
                    producer_id=blocker.producer_id,
                    producer_epoch=blocker.producer_epoch,
                    owned_prefixes=owned_prefixes,
                    prepared=prepared,
                    writing=writing,
                )
                reason = (
                    f"{detail}; blocked by producer {blocker.producer_id} epoch {blocker.producer_epoch} "
                    f"({transactional_id}: {why})"
                )
        stalls.append(
            LsoStall(
                topic=poll.topic,
                partition=poll.partition,
                last_stable_offset=poll.last_stable_offset,
                high_watermark=poll.high_watermark,
                stalled_since_ms=since_ms,
                stalled_for_ms=stalled_for,
                blocking_producer_id=None if blocker is None else blocker.producer_id,
                blocking_producer_epoch=None if blocker is None else blocker.producer_epoch,
                txn_start_offset=None if blocker is None else blocker.current_txn_start_offset,
                transactional_id=transactional_id,
                kind=kind,
                reason=reason,
            )
        )
    return stalls


def expand_partitions(admin: ProbingAdmin, entries: Sequence[str]) -> list[tuple[str, int]]:
    """``"topic"`` -> every partition of the topic (metadata); ``"topic:N"`` -> that partition."""
    wanted: list[tuple[str, int]] = []
    whole_topics: list[str] = []
    for entry in entries:
        topic, sep, number = str(entry).strip().rpartition(":")
        if sep and number.isdigit() and topic:
            wanted.append((topic, int(number)))
        else:
            whole_topics.append(str(entry).strip())
    if whole_topics:
        from airflow_provider_kafka_eos.kafka.errors import KafkaEosError

        for topic in admin.wire.admin.describe_topics(whole_topics):
            if topic.get("error_code"):
                raise KafkaEosError(
                    f"lso_partitions names topic {topic.get('name')!r}, which the cluster does not have "
                    f"(error {topic['error_code']})",
                    runbook=RUNBOOK_LSO,
                )
            wanted.extend((topic["name"], p["partition_index"]) for p in topic["partitions"])
    return sorted(set(wanted))


def poll_partitions(
    admin: ProbingAdmin, entries: Sequence[str]
) -> tuple[list[PartitionOffsets], dict[int, str]]:
    """One LSO probe (``kafka/admin/lso.py``) of the watched partitions, in this module's terms.

    Returns the polls and producer id -> transactional id for the open transactions the probe
    could name (ListTransactions).
    """
    statuses = admin.lso_probe(expand_partitions(admin, entries))
    polls = []
    names: dict[int, str] = {}
    for status in statuses:
        producers = []
        for txn in status.open_transactions:
            producers.append(
                ProducerState(
                    producer_id=txn.producer_id,
                    producer_epoch=txn.producer_epoch,
                    last_timestamp_ms=txn.last_timestamp_ms,
                    current_txn_start_offset=txn.txn_start_offset,
                )
            )
            if txn.transactional_id:
                names[txn.producer_id] = txn.transactional_id
        polls.append(
            PartitionOffsets(
                topic=status.topic,
                partition=status.partition,
                last_stable_offset=status.last_stable_offset,
                high_watermark=status.high_watermark,
                producers=tuple(producers),
            )
        )
    return polls, names
