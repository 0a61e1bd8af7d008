"""One poll of the sensor: gather from Kafka and the manifest store, classify, report.

:func:`scan` is the one entry point shared by the sensor, its deferrable trigger, the abort
operator and the benchmark: it lists the lingering transactions under the spec's prefixes, sorts
them with ``classify.py``'s rule, polls the watched partitions for LSO stalls
(``lso_stalls.py``) and returns :class:`Findings`, the report the sensor pushes to XCom.

No Airflow imports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from airflow_provider_kafka_eos.kafka.checkpoints.store import load_prepared
from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import STANDARD_CHAIN, StoreAccess
from airflow_provider_kafka_eos.kafka.checkpoints.writer_lease import load_writing
from airflow_provider_kafka_eos.kafka.operations.classify import (
    FindingKind,
    TransactionFinding,
    classify,
    now_ms,
)
from airflow_provider_kafka_eos.kafka.operations.lso_history import record_samples
from airflow_provider_kafka_eos.kafka.operations.lso_stalls import (
    LsoStall,
    LsoStallTracker,
    ProbingAdmin,
    find_lso_stalls,
    poll_partitions,
)


class ScanningAdmin(ProbingAdmin, Protocol):
    """What a scan needs of the admin handed in (a TransactionAdmin): the lingering transactions,
    the LSO probe (:class:`~airflow_provider_kafka_eos.kafka.operations.lso_stalls.ProbingAdmin`)
    and DescribeTransactions (input stalls)."""

    def find_lingering(self, prefixes: Sequence[str] | None = None, min_age_ms: int = 0) -> list[Any]: ...

    def describe(self, ids: Iterable[str], *, missing_ok: bool = False) -> dict[str, Any]: ...


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


def scan(admin: ScanningAdmin, spec: ScanSpec, *, tracker: LsoStallTracker | None = None,
         access: StoreAccess = STANDARD_CHAIN) -> Findings:
    """One poll: lingering transactions (and LSO stalls, if asked) classified against the manifests.

    ``admin`` is an open ``TransactionAdmin``. Blocking: async callers use ``asyncio.to_thread``.
    The manifest store must be readable (``ManifestStoreError`` otherwise): a store that cannot
    be read would make every commit-pending transaction look like an orphan. The live writer
    leases are read with it (a pipeline's checkpoint being prepared is its writer's, not an orphan:
    ``classify.py``). ``access``: how this process reaches the store (the hook's ``store_access``).
    """
    source = "the sensor's manifest_base_uri"
    prepared = load_prepared(spec.manifest_base_uri, source=source, access=access)
    writing = load_writing(spec.manifest_base_uri, source=source, access=access)
    lingering = admin.find_lingering(
        prefixes=list(spec.prefixes) if spec.prefixes else None, min_age_ms=spec.min_age_ms
    )
    at_ms = now_ms()
    findings = Findings(
        checked_at_ms=at_ms,
        min_age_ms=spec.min_age_ms,
        prefixes=spec.prefixes,
        transactions=classify(lingering, owned_prefixes=spec.owned, prepared=prepared, writing=writing,
                              at_ms=at_ms),
        manifest_base_uri=spec.manifest_base_uri,
    )
    watched = (*spec.lso_partitions, *spec.input_topics)
    if watched:
        polls, names = poll_partitions(admin, watched)
        if spec.manifest_base_uri:  # the console's lag history (best effort: lso_history.py)
            record_samples(spec.manifest_base_uri, polls, now_ms(), access=access)
        findings.lso_stalls = find_lso_stalls(
            polls,
            min_stall_ms=spec.min_lso_stall_ms if spec.min_lso_stall_ms is not None else spec.min_age_ms,
            tracker=tracker if tracker is not None else LsoStallTracker(),
            producer_transactions=names,
            owned_prefixes=spec.owned,
            prepared=prepared,
            writing=writing,
            at_ms=now_ms(),
        )
        if spec.input_topics:
            from airflow_provider_kafka_eos.kafka.operations.input_stalls import mark_input_stalls

            findings.lso_stalls = mark_input_stalls(admin, findings.lso_stalls, spec.input_topics)
    return findings
