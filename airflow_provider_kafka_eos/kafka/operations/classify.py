"""Sort lingering transactions into what may be aborted, what must be committed, and what is not ours.

Aborting too much loses data (a transaction listed in a PREPARED manifest is a vote that has
already been cast: it must be committed), aborting too little blocks every read_committed
consumer at the last stable offset. So every lingering transaction the sensor finds is given
exactly one kind, and only one kind is ever safe to abort without a human:

- *orphan*: under one of our configured transactional-id prefixes and in no PREPARED manifest;
  nobody will ever commit it, so aborting it (by fencing) only unblocks consumers.
- *commit-pending*: listed in a PREPARED manifest; it must be committed from that manifest,
  never aborted.
- *writing*: of a pipeline whose writer holds its lease (``writer_lease.py``): the checkpoint
  being prepared has no manifest before its vote, so its open transactions are the writer's own,
  not lingering; they are left to it (its restore settles what earlier attempts left).
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
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.abort_plan import AbortPolicy
from airflow_provider_kafka_eos.kafka.checkpoints.store import PreparedRef
from airflow_provider_kafka_eos.runbook import reference as runbook_reference

RUNBOOK_ORPHAN = "orphaned-transaction"
RUNBOOK_COMMIT_PENDING = "commit-pending-transaction"
RUNBOOK_LSO = "consumers-stuck-at-lso"
RUNBOOK_INPUT_LAG = "input-lag"
RUNBOOK_WRITING = "overlapping-runs"


class FindingKind(str, Enum):
    ORPHAN = "orphan"
    COMMIT_PENDING = "commit-pending"
    WRITING = "writing"
    FOREIGN = "foreign"

    @property
    def next_step(self) -> str:
        """What an operator should do about a finding of this kind (shown in logs and XCom)."""
        return {
            FindingKind.ORPHAN: "abort",
            FindingKind.COMMIT_PENDING: "commit from manifest",
            FindingKind.WRITING: "wait for its writer",
            FindingKind.FOREIGN: "report only",
        }[self]

    @property
    def runbook(self) -> str:
        return {
            FindingKind.ORPHAN: RUNBOOK_ORPHAN,
            FindingKind.COMMIT_PENDING: RUNBOOK_COMMIT_PENDING,
            FindingKind.WRITING: RUNBOOK_WRITING,
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
    writing: Mapping[str, str] | None = None,
) -> tuple[FindingKind, str, str | None]:
    """(kind, reason, manifest uri) for one transactional id.

    The manifest wins over the prefix: a transaction named in a PREPARED manifest is never an
    orphan, even when the producer id or epoch differ from the manifest's (then the commit will
    fail loudly as data loss, which a human must see; aborting would hide it). The writer lease
    comes next: ``writing`` (prefix -> its live writer, described: ``writer_lease.load_writing``)
    makes a transaction of a pipeline being written the writer's, with the same rule the abort's
    refusal applies (``AbortPolicy.writer_of``).
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
    writer = AbortPolicy(writing=writing or {}).writer_of(transactional_id)
    if writer is not None:
        return (FindingKind.WRITING, f"its pipeline is being written by {writer}: the checkpoint being "
                "prepared has no manifest before its vote", None)
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
    writing: Mapping[str, str] | None = None,
    at_ms: int | None = None,
) -> list[TransactionFinding]:
    """Findings for transaction descriptions (``TransactionAdmin.find_lingering`` results);
    ``writing``: the live writers (:func:`classify_one`)."""
    at_ms = now_ms() if at_ms is None else at_ms
    findings = []
    for desc in lingering:
        kind, reason, uri = classify_one(
            desc.transactional_id,
            producer_id=desc.producer_id,
            producer_epoch=desc.producer_epoch,
            owned_prefixes=owned_prefixes,
            prepared=prepared,
            writing=writing,
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
