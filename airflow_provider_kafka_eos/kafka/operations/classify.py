"""Sort lingering transactions into what may be aborted, what must be committed, and what is not ours.

Aborting too much loses data (a transaction listed in a PREPARED manifest is a vote that has
already been cast: it must be committed), aborting too little blocks every read_committed
consumer at the last stable offset. So every lingering transaction the sensor finds is given
exactly one kind, and only one kind is ever safe to abort without a human:

- *orphan*: under one of our configured transactional-id prefixes and in no PREPARED manifest;
  nobody will ever commit it, so aborting it (by fencing) only unblocks consumers.
- *commit-pending*: listed in a PREPARED manifest; it must be committed from that manifest,
  never aborted.
- *foreign*: outside our prefixes; some other application owns it, so we only report it.

The LSO-stall finding catches what listing cannot see (producers outside our prefixes,
clusters without ListTransactions): a partition whose last stable offset is pinned by an open
transaction while data piles up behind it, naming the blocking producer.

No Airflow imports: the sensor, the deferrable trigger, the abort operator and the benchmark
all call :func:`scan` / :func:`classify`, and a CLI could too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.abort_plan import AbortPolicy
from airflow_provider_kafka_eos.kafka.checkpoints.store import PreparedRef, load_prepared
from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import STANDARD_CHAIN, StoreAccess
from airflow_provider_kafka_eos.runbook import reference as runbook_reference

RUNBOOK_ORPHAN = "orphaned-transaction"
RUNBOOK_COMMIT_PENDING = "commit-pending-transaction"
RUNBOOK_LSO = "consumers-stuck-at-lso"
RUNBOOK_INPUT_LAG = "input-lag"


class FindingKind(str, Enum):
    ORPHAN = "orphan"
    COMMIT_PENDING = "commit-pending"
    FOREIGN = "foreign"

    @property
    def next_step(self) -> str:
        """What an operator should do about a finding of this kind (shown in logs and XCom)."""
        return {
            FindingKind.ORPHAN: "abort",
            FindingKind.COMMIT_PENDING: "commit from manifest",
            FindingKind.FOREIGN: "report only",
        }[self]

    @property
    def runbook(self) -> str:
        return {
            FindingKind.ORPHAN: RUNBOOK_ORPHAN,
            FindingKind.COMMIT_PENDING: RUNBOOK_COMMIT_PENDING,
            FindingKind.FOREIGN: RUNBOOK_LSO,
        }[self]


def now_ms() -> int:
    return int(time.time() * 1000)


def _enum_value(value: Any) -> Any:
    return getattr(value, "value", value)


def under_prefixes(transactional_id: str, prefixes: Iterable[str]) -> bool:
    """Plain string prefix match, the same rule ``TransactionAdmin.list(prefixes=...)`` applies.

    A prefix that should not swallow its longer siblings (``orders`` vs ``orders2``) must end
    with the naming strategy's separator (``orders-``); see docs/configuration/sensor-and-abort.md.
    """
    return AbortPolicy(prefixes=tuple(prefixes)).owner(transactional_id) is not None


def partition_names(partitions: Any) -> tuple[str, ...]:
    """``topic-partition`` strings from the shapes transaction descriptions use.

    Accepts objects with ``topic``/``partition`` attributes, ``(topic, partition)`` pairs,
    and ``{topic: [partitions]}`` mappings, so findings stay JSON-able whatever the admin
    module returns.
    """
    if not partitions:
        return ()
    names: list[str] = []
    if isinstance(partitions, Mapping):
        for topic, numbers in partitions.items():
            names.extend(f"{topic}-{number}" for number in numbers)
    else:
        for item in partitions:
            if hasattr(item, "topic"):
                names.append(f"{item.topic}-{item.partition}")
            else:
                topic, number = item
                names.append(f"{topic}-{number}")
    return tuple(sorted(names))


@dataclass(frozen=True)
class TransactionFinding:
    """One lingering transaction, its kind, and why it got that kind. JSON-able via ``to_dict``."""

    transactional_id: str
    kind: FindingKind
    reason: str
    state: str
    producer_id: int
    producer_epoch: int
    start_time_ms: int
    timeout_ms: int
    age_ms: int
    partitions: tuple[str, ...] = ()
    manifest_uri: str | None = None
    source: str = "list-transactions"

    @property
    def runbook(self) -> str:
        return runbook_reference(self.kind.runbook)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["kind"] = self.kind.value
        data["partitions"] = list(self.partitions)
        data["next_step"] = self.kind.next_step
        data["runbook"] = self.runbook
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TransactionFinding:
        return cls(
            transactional_id=str(data["transactional_id"]),
            kind=FindingKind(data["kind"]),
            reason=str(data.get("reason", "")),
            state=str(data.get("state", "")),
            producer_id=int(data["producer_id"]),
            producer_epoch=int(data["producer_epoch"]),
            start_time_ms=int(data.get("start_time_ms", -1)),
            timeout_ms=int(data.get("timeout_ms", -1)),
            age_ms=int(data.get("age_ms", -1)),
            partitions=tuple(data.get("partitions") or ()),
            manifest_uri=data.get("manifest_uri"),
            source=str(data.get("source", "list-transactions")),
        )


def classify_one(
    transactional_id: str,
    *,
    producer_id: int,
    producer_epoch: int,
    owned_prefixes: Sequence[str],
    prepared: Mapping[str, PreparedRef],
) -> tuple[FindingKind, str, str | None]:
    """(kind, reason, manifest uri) for one transactional id.

    The manifest wins over the prefix: a transaction named in a PREPARED manifest is never an
    orphan, even when the producer id or epoch differ from the manifest's (then the commit will
    fail loudly as data loss, which a human must see; aborting would hide it).
    """
    ref = prepared.get(transactional_id)
    if ref is not None:
        reason = f"listed in PREPARED manifest {ref.manifest_uri} (checkpoint {ref.checkpoint_id})"
        if (ref.producer_id, ref.producer_epoch) != (producer_id, producer_epoch):
            reason += (
                f", but the manifest holds producer {ref.producer_id} epoch {ref.producer_epoch} "
                f"and the open transaction is producer {producer_id} epoch {producer_epoch}: a later use "
                "of the id; the commit establishes from the coordinator and the data what became of the "
                "recorded one"
            )
        return FindingKind.COMMIT_PENDING, reason, ref.manifest_uri
    prefix = AbortPolicy(prefixes=tuple(owned_prefixes)).owner(transactional_id)
    if prefix is not None:
        return FindingKind.ORPHAN, f"under prefix {prefix!r} and in no PREPARED manifest", None
    if owned_prefixes:
        return FindingKind.FOREIGN, f"outside the configured prefixes {list(owned_prefixes)}", None
    return FindingKind.FOREIGN, "no transactional-id prefix is configured as ours", None


def classify(
    lingering: Iterable[Any],
    *,
    owned_prefixes: Sequence[str],
    prepared: Mapping[str, PreparedRef],
    at_ms: int | None = None,
) -> list[TransactionFinding]:
    """Findings for transaction descriptions (``TransactionAdmin.find_lingering`` results)."""
    at_ms = now_ms() if at_ms is None else at_ms
    findings = []
    for desc in lingering:
        kind, reason, uri = classify_one(
            desc.transactional_id,
            producer_id=desc.producer_id,
            producer_epoch=desc.producer_epoch,
            owned_prefixes=owned_prefixes,
            prepared=prepared,
        )
        start = int(desc.start_time_ms if desc.start_time_ms is not None else -1)
        findings.append(
            TransactionFinding(
                transactional_id=desc.transactional_id,
                kind=kind,
                reason=reason,
                state=str(_enum_value(desc.state)),
                producer_id=int(desc.producer_id),
                producer_epoch=int(desc.producer_epoch),
                start_time_ms=start,
                timeout_ms=int(desc.timeout_ms),
                age_ms=at_ms - start if start >= 0 else -1,
                partitions=partition_names(getattr(desc, "partitions", ())),
                manifest_uri=uri,
            )
        )
    return sorted(findings, key=lambda f: (f.kind.value, f.transactional_id))


# --------------------------------------------------------------------------------------------
# LSO stalls


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
    at_ms: int | None = None,
) -> list[LsoStall]:
    """Partitions pinned at their LSO for at least ``min_stall_ms`` with data behind it.

    ``producer_transactions`` maps producer id -> transactional id (from ListTransactions);
    a blocking producer it cannot name is reported as foreign, since we cannot prove it is ours.
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


# --------------------------------------------------------------------------------------------
# The report the sensor pushes to XCom


@dataclass
class Findings:
    """Everything one poll found. ``to_dict`` is what goes to XCom (no config, no secrets)."""

    checked_at_ms: int
    min_age_ms: int
    prefixes: tuple[str, ...] | None
    transactions: list[TransactionFinding] = field(default_factory=list)
    lso_stalls: list[LsoStall] = field(default_factory=list)
    # The manifest store the scan read (the sensor's or its connection's): where the full
    # findings go by default when the XCom is cut. Not in to_dict (XCom carries no config).
    manifest_base_uri: str | None = field(default=None, compare=False)

    def __bool__(self) -> bool:
        return bool(self.transactions or self.lso_stalls)

    def of_kind(self, kind: FindingKind | str) -> list[TransactionFinding]:
        kind = FindingKind(kind)
        return [f for f in self.transactions if f.kind is kind]

    def counts(self) -> dict[str, int]:
        counts = {kind.value: len(self.of_kind(kind)) for kind in FindingKind}
        counts["lso-stall"] = len(self.lso_stalls)
        return counts

    def summary(self) -> str:
        counts = self.counts()
        return ", ".join(f"{n} {kind}" for kind, n in counts.items())

    def to_dict(self) -> dict[str, Any]:
        return {
            "checked_at_ms": self.checked_at_ms,
            "min_age_ms": self.min_age_ms,
            "prefixes": None if self.prefixes is None else list(self.prefixes),
            "counts": self.counts(),
            "transactions": [f.to_dict() for f in self.transactions],
            "lso_stalls": [s.to_dict() for s in self.lso_stalls],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, access: StoreAccess = STANDARD_CHAIN) -> Findings:
        """From ``to_dict()`` or the sensor's bounded XCom (``findings_store.xcom_payload``): a
        payload whose lists were cut is replaced by the full findings file it names (read with
        ``access``, the store's credentials)."""
        from airflow_provider_kafka_eos.kafka.operations.findings_store import resolve

        data = resolve(data, access=access)
        prefixes = data.get("prefixes")
        return cls(
            checked_at_ms=int(data.get("checked_at_ms", 0)),
            min_age_ms=int(data.get("min_age_ms", 0)),
            prefixes=None if prefixes is None else tuple(prefixes),
            transactions=[TransactionFinding.from_dict(f) for f in data.get("transactions") or ()],
            lso_stalls=[LsoStall.from_dict(s) for s in data.get("lso_stalls") or ()],
        )

    def table(self, limit: int | None = 200) -> str:
        """A fixed-width table for task logs; past ``limit`` rows it says how many more are in XCom."""
        rows = [("KIND", "TRANSACTIONAL ID", "PRODUCER", "EPOCH", "AGE S", "NEXT STEP", "WHY")]
        for f in self.transactions:
            rows.append(
                (
                    f.kind.value,
                    f.transactional_id,
                    str(f.producer_id),
                    str(f.producer_epoch),
                    f"{f.age_ms / 1000:.0f}" if f.age_ms >= 0 else "?",
                    f.kind.next_step,
                    f.reason,
                )
            )
        for s in self.lso_stalls:
            rows.append(
                (
                    s.label,
                    s.transactional_id or f"{s.topic}-{s.partition}",
                    str(s.blocking_producer_id),
                    str(s.blocking_producer_epoch),
                    f"{s.stalled_for_ms / 1000:.0f}",
                    s.next_step,
                    s.reason,
                )
            )
        hidden = len(rows) - 1 - limit if limit is not None else 0
        if hidden > 0:
            rows = [
                *rows[: limit + 1],
                ("...", f"{hidden} more (all are in the findings file the XCom names)", "", "", "", "", ""),
            ]
        return format_table(rows)


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns; the last column is not padded (it holds free text)."""
    if not rows:
        return ""
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [str(cell).ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, str(row[-1])]).rstrip())
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# One poll: gather from Kafka and the manifest store, then classify


@dataclass(frozen=True)
class ScanSpec:
    """What one poll looks at. JSON-able (``to_dict``) so the trigger can carry it.

    ``prefixes`` selects what to list (``None``: the whole cluster); ``owned_prefixes`` says
    which of those are ours to abort (defaults to ``prefixes``); ``lso_partitions`` are
    ``"topic"`` (every partition) or ``"topic:N"`` entries to watch for LSO stalls;
    ``input_topics`` are a Kafka-input pipeline's input topics, watched the same way and
    reported as input stalls (the pipeline cannot read past them).
    """

    min_age_ms: int
    prefixes: tuple[str, ...] | None = None
    owned_prefixes: tuple[str, ...] | None = None
    manifest_base_uri: str | None = None
    lso_partitions: tuple[str, ...] = ()
    min_lso_stall_ms: int | None = None
    input_topics: tuple[str, ...] = ()

    @property
    def owned(self) -> tuple[str, ...]:
        if self.owned_prefixes is not None:
            return tuple(self.owned_prefixes)
        return tuple(self.prefixes or ())

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("prefixes", "owned_prefixes", "lso_partitions", "input_topics"):
            if data[key] is not None:
                data[key] = list(data[key])
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScanSpec:
        def tup(value: Any) -> tuple[str, ...] | None:
            return None if value is None else tuple(value)

        return cls(
            min_age_ms=int(data["min_age_ms"]),
            prefixes=tup(data.get("prefixes")),
            owned_prefixes=tup(data.get("owned_prefixes")),
            manifest_base_uri=data.get("manifest_base_uri"),
            lso_partitions=tuple(data.get("lso_partitions") or ()),
            min_lso_stall_ms=data.get("min_lso_stall_ms"),
            input_topics=tuple(data.get("input_topics") or ()),  # absent in triggers serialized before it
        )


def scan(admin: Any, spec: ScanSpec, *, tracker: LsoStallTracker | None = None,
         access: StoreAccess = STANDARD_CHAIN) -> Findings:
    """One poll: lingering transactions (and LSO stalls, if asked) classified against the manifests.

    ``admin`` is an open ``TransactionAdmin``. Blocking: async callers use ``asyncio.to_thread``.
    The manifest store must be readable (``ManifestStoreError`` otherwise): a store that cannot
    be read would make every commit-pending transaction look like an orphan. ``access``: how
    this process reaches the store (the hook's ``store_access``).
    """
    prepared = load_prepared(spec.manifest_base_uri, source="the sensor's manifest_base_uri", access=access)
    lingering = admin.find_lingering(
        prefixes=list(spec.prefixes) if spec.prefixes else None, min_age_ms=spec.min_age_ms
    )
    at_ms = now_ms()
    findings = Findings(
        checked_at_ms=at_ms,
        min_age_ms=spec.min_age_ms,
        prefixes=spec.prefixes,
        transactions=classify(lingering, owned_prefixes=spec.owned, prepared=prepared, at_ms=at_ms),
        manifest_base_uri=spec.manifest_base_uri,
    )
    watched = (*spec.lso_partitions, *spec.input_topics)
    if watched:
        polls, names = poll_partitions(admin, watched)
        findings.lso_stalls = find_lso_stalls(
            polls,
            min_stall_ms=spec.min_lso_stall_ms if spec.min_lso_stall_ms is not None else spec.min_age_ms,
            tracker=tracker if tracker is not None else LsoStallTracker(),
            producer_transactions=names,
            owned_prefixes=spec.owned,
            prepared=prepared,
            at_ms=now_ms(),
        )
        if spec.input_topics:
            from airflow_provider_kafka_eos.kafka.operations.input_stalls import mark_input_stalls

            findings.lso_stalls = mark_input_stalls(admin, findings.lso_stalls, spec.input_topics)
    return findings


def expand_partitions(admin: Any, entries: Sequence[str]) -> list[tuple[str, int]]:
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


def poll_partitions(admin: Any, entries: Sequence[str]) -> tuple[list[PartitionOffsets], dict[int, str]]:
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
