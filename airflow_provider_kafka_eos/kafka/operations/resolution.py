"""One operator action on transactions: validation and execution shared by the CLI and the UI.

``kafka-eos-txn`` and the manual-resolution DAG (Params form) both build a
:class:`ResolutionRequest`, call :meth:`ResolutionRequest.validate` and
:func:`run_resolution`, so a user sees the same words and the same safety rules whichever
door they came in by: a commit needs the producer id and epoch from the manifest or
``describe``; every abort first reads the manifest store (``manifest_base_uri``) and refuses
the transactions a PREPARED manifest lists (that would be data loss, invariant 4), unless the
request says ``protect=False``; a dry run runs every check the real action runs. The rules
themselves live in ``kafka/checkpoints/lifecycle.py``; this module only maps requests onto them.

Failures the user must act on raise :class:`~airflow_provider_kafka_eos.kafka.errors.KafkaEosError`
subclasses (their text names the transaction, the cause and the runbook page);
:class:`UsageError` means the request itself is wrong and nothing was sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import STANDARD_CHAIN, StoreAccess
from airflow_provider_kafka_eos.kafka.errors import KafkaEosError, UsageError
from airflow_provider_kafka_eos.kafka.protocol.verdicts import Verdict
from airflow_provider_kafka_eos.kafka.validation import (
    parse_duration_ms as parse_duration_ms,  # re-exported: its one owner is kafka/validation.py
)
from airflow_provider_kafka_eos.kafka.validation import (
    validate_prefix,
    validate_topic,
    validate_transactional_id,
)
from airflow_provider_kafka_eos.runbook import reference as runbook_reference

ACTIONS = (
    "list",
    "describe",
    "abort",
    "commit",
    "commit-from-manifest",
    "find-hanging",
    "preflight",
    "abort-partition",
)
ABORT_CHECKPOINT = "abort-checkpoint"  # internal: --action abort --manifest URI
TRANSACTION_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "PrepareEpochFence",
)
DEFAULT_HANGING_MIN_AGE_MS = 15 * 60 * 1000
MAX_EPOCH = 32767

Progress = Callable[[int, int, str], None]

# How the CLI names each request field in a message. Another front end (the manual DAG's form)
# passes its own names to ``validate(field_names=...)``: the rules stay here, only words differ.
CLI_FIELD_NAMES: Mapping[str, str] = MappingProxyType(
    {
        "transactional_id": "--transactional-id",
        "producer_id": "--producer-id",
        "epoch": "--epoch",
        "prefixes": "--prefix",
        "states": "--state",
        "min_age_ms": "--min-age",
        "manifest_uri": "--manifest",
        "dry_run": "--dry-run",
        "topics": "--topic",
        "transaction_timeout_ms": "--transaction-timeout-ms",
        "two_phase_commit": "--two-phase-commit",
        "partition": "--partition",
        "force": "--force",
    }
)


def _normalise_state(state: str, name: str = "--state") -> str:
    for known in TRANSACTION_STATES:
        if known.lower() == state.strip().lower():
            return known
    raise UsageError(
        f"{name} {state!r} is not a Kafka transaction state (one of {', '.join(TRANSACTION_STATES)})"
    )


def _short_names(n: Mapping[str, str]) -> tuple[str, str, str, str, str]:
    """The field names most messages use, in a fixed order (keeps the messages on one line each)."""
    return n["transactional_id"], n["producer_id"], n["epoch"], n["manifest_uri"], n["prefixes"]


@dataclass(frozen=True)
class ResolutionRequest:
    """What the user asked for. No secrets: connection settings travel separately."""

    action: str
    transactional_id: str | None = None
    producer_id: int | None = None
    epoch: int | None = None
    prefixes: tuple[str, ...] = ()
    states: tuple[str, ...] = ()
    min_age_ms: int | None = None
    manifest_uri: str | None = None
    dry_run: bool = False
    manifest_base_uri: str | None = None
    protect: bool = True
    # preflight only (optional): the pipeline's output topics and transaction timeout.
    topics: tuple[str, ...] = ()
    transaction_timeout_ms: int | None = None
    two_phase_commit: bool = False  # preflight: the pipeline uses KIP-939 2PC (TWO_PHASE_COMMIT ACL)
    # abort-partition (one of ``topics``) and find-hanging --topic: the partition to act on / scan
    partition: int | None = None
    force: bool = False  # abort-partition: even though the coordinator still owns the transaction

    def validate(self, field_names: Mapping[str, str] | None = None) -> ResolutionRequest:
        """The request, normalised; raises UsageError with the text the user sees.

        ``field_names`` maps request fields (``producer_id``...) to the words the caller's front
        end uses for them; missing ones keep the CLI's flag (``CLI_FIELD_NAMES``).
        """
        n = {**CLI_FIELD_NAMES, **(field_names or {})}
        tid, _, _, mf, px = _short_names(n)
        action = (self.action or "").strip().lower()
        if action not in (*ACTIONS, ABORT_CHECKPOINT):
            raise UsageError(f"unknown action {self.action!r}; choose one of {', '.join(ACTIONS)}")
        txn_id = (self.transactional_id or "").strip() or None
        prefixes = tuple(p for p in (s.strip() for s in self.prefixes) if p)
        if txn_id is not None:
            validate_transactional_id(txn_id, field=n["transactional_id"])
        for prefix in prefixes:
            validate_prefix(prefix, field=n["prefixes"])
        for topic in self.topics:
            validate_topic(topic, field=n["topics"])
        if self.transaction_timeout_ms is not None and self.transaction_timeout_ms <= 0:
            raise UsageError(
                f"{n['transaction_timeout_ms']} must be positive, got {self.transaction_timeout_ms}"
            )
        states = tuple(_normalise_state(s, n["states"]) for s in self.states)
        manifest = (self.manifest_uri or "").strip() or None
        if action == "commit" and manifest and not txn_id:
            action = "commit-from-manifest"
        if action == "abort" and manifest:
            if txn_id or prefixes:
                raise UsageError(
                    f"abort takes {mf} (a whole checkpoint), {tid} or {px}, "
                    "one of them",
                    transactional_id=txn_id,
                )
            action = ABORT_CHECKPOINT
        normalised = replace(
            self,
            action=action,
            transactional_id=txn_id,
            prefixes=prefixes,
            states=states,
            manifest_uri=manifest,
            manifest_base_uri=(self.manifest_base_uri or "").strip() or None,
        )
        normalised._check_targets(n)
        normalised._check_pid_epoch(n)
        normalised._check_partition_abort(n)
        return normalised

    def _check_partition_abort(self, n: Mapping[str, str]) -> None:
        """abort-partition: one topic, one partition; the producer id and epoch both or neither."""
        _, pid, ep, _, _ = _short_names(n)
        topic, part = n["topics"], n["partition"]
        if self.action != "abort-partition":
            if self.force:
                raise UsageError(f"{n['force']} applies to the abort-partition action only")
            if self.partition is not None and self.action != "find-hanging":
                raise UsageError(f"{part} applies to abort-partition and find-hanging only")
            return
        if len(self.topics) != 1 or self.partition is None:
            raise UsageError(f"abort-partition needs one {topic} and its {part}")
        if self.partition < 0:
            raise UsageError(f"{part} must be >= 0, got {self.partition}")
        if (self.producer_id is None) != (self.epoch is None):
            raise UsageError(
                f"abort-partition takes both {pid} and {ep} (from `find-hanging --topic`), or neither "
                "(then the partition must have exactly one hanging transaction)"
            )

    def _check_targets(self, n: Mapping[str, str]) -> None:
        tid, pid, ep, mf, px = _short_names(n)
        action, txn_id, prefixes, manifest = (
            self.action,
            self.transactional_id,
            self.prefixes,
            self.manifest_uri,
        )
        if self.min_age_ms is not None and self.min_age_ms < 0:
            raise UsageError(f"{n['min_age_ms']} must not be negative, got {self.min_age_ms} ms")
        if action == "commit" and not txn_id:
            raise UsageError(f"commit needs {tid} (or {mf} to commit a whole checkpoint)")
        if action == "commit" and manifest:
            raise UsageError(
                f"commit takes either {tid} with {pid}/{ep}, or {mf}, not both",
                transactional_id=txn_id,
            )
        if action == "commit-from-manifest" and not manifest:
            raise UsageError(f"commit-from-manifest needs {mf} (the checkpoint manifest to commit)")
        if action in ("describe", "abort"):
            if txn_id and prefixes:
                raise UsageError(
                    f"{action} takes either {tid} or {px}, not both", transactional_id=txn_id
                )
            if not txn_id and not prefixes:
                raise UsageError(
                    f"{action} needs {tid}, or {px} for every transaction under a "
                    "prefix" + (f", or {mf} for a whole checkpoint" if action == "abort" else "")
                )
        no_id = ("list", "find-hanging", "preflight", "commit-from-manifest", "abort-partition")
        if action in no_id and txn_id:
            raise UsageError(f"{action} does not take {tid}; use {px} to narrow it down")
        if action == "preflight" and not prefixes:
            raise UsageError(f"preflight needs {px} (the pipeline's transactional-id prefix)")
        if self.two_phase_commit and action != "preflight":
            raise UsageError(f"{n['two_phase_commit']} applies to the preflight action only")
        if action == "abort-partition" and prefixes:
            raise UsageError(f"abort-partition does not take {px}: it acts on one partition")
        dry_run_actions = ("abort", "commit", "commit-from-manifest", ABORT_CHECKPOINT, "abort-partition")
        if self.dry_run and action not in dry_run_actions:
            raise UsageError(f"{n['dry_run']} applies to abort and commit, not {action}")

    def _check_pid_epoch(self, n: Mapping[str, str]) -> None:
        tid, pid, ep, _, _ = _short_names(n)
        txn_id = self.transactional_id
        given = self.producer_id is not None or self.epoch is not None
        single_abort = self.action == "abort" and txn_id is not None
        if given and self.action not in ("commit", "abort-partition") and not single_abort:
            raise UsageError(
                f"{pid} and {ep} only apply to the commit action, or to the abort action "
                f"with {tid} (compare-and-abort)"
            )
        if self.action == "commit" and (self.producer_id is None or self.epoch is None):
            raise UsageError(
                f"commit needs {pid} and {ep} (from the checkpoint manifest or `describe`)",
                transactional_id=txn_id,
            )
        if single_abort and given and (self.producer_id is None or self.epoch is None):
            raise UsageError(
                f"compare-and-abort needs both {pid} and {ep}", transactional_id=txn_id
            )
        if self.producer_id is not None and self.producer_id < 0:
            raise UsageError(f"{pid} must be >= 0, got {self.producer_id}", transactional_id=txn_id)
        if self.epoch is not None and not 0 <= self.epoch <= MAX_EPOCH:
            raise UsageError(f"{ep} must be in 0..{MAX_EPOCH}, got {self.epoch}", transactional_id=txn_id)


@dataclass
class ResolutionResult:
    """Rows for a table (or JSON / XCom), a one-line summary, and whether everything went well."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    summary: str = ""
    ok: bool = True
    columns: tuple[str, ...] = ()
    # Why the answer may be incomplete (a listing the principal cannot fully see); the CLI
    # prints them on stderr and fails with --strict.
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "summary": self.summary, "rows": self.rows, "warnings": self.warnings}


def run_resolution(
    admin: Any,
    request: ResolutionRequest,
    progress: Progress | None = None,
    *,
    config: Any = None,
    access: StoreAccess = STANDARD_CHAIN,
) -> ResolutionResult:
    """Execute a validated request with an open ``TransactionAdmin``.

    ``progress(done, total, label)`` is called during bulk work. ``config`` (the
    ``KafkaClientConfig``, default: the admin's) is used only by ``preflight``, to name the
    principal whose ACLs are checked. ``access``: how this process reaches the manifest store
    (the hook's ``store_access``; the CLI's ``--conn-id``), for every action that reads it.
    """
    request = request.validate()
    with_store = {
        "abort": _abort,
        ABORT_CHECKPOINT: _abort_checkpoint,
        "commit-from-manifest": _commit_from_manifest,
        "find-hanging": _find_hanging,
        "abort-partition": _abort_partition,
    }
    if request.action in with_store:
        return with_store[request.action](admin, request, progress, access)
    handler = {
        "list": _list,
        "describe": _describe,
        "commit": _commit,
        "preflight": _preflight,
    }[request.action]
    if request.action == "preflight":
        return _preflight(
            admin, request, progress, config if config is not None else getattr(admin, "config", None)
        )
    return handler(admin, request, progress)


# -- helpers ------------------------------------------------------------------------------


def _now_ms() -> int:
    return int(time.time() * 1000)


def _value(obj: Any) -> Any:
    """Enum members (kafka-python's TransactionState) as their wire value."""
    return getattr(obj, "value", obj)


def _partitions_text(partitions: Iterable[Any]) -> str:
    return ",".join(sorted(f"{p.topic}-{p.partition}" for p in partitions))


def _description_row(desc: Any) -> dict[str, Any]:
    start = getattr(desc, "start_time_ms", -1)
    age = round((_now_ms() - start) / 1000, 1) if start is not None and start >= 0 else None
    return {
        "transactional_id": desc.transactional_id,
        "state": _value(desc.state),
        "producer_id": desc.producer_id,
        "producer_epoch": desc.producer_epoch,
        "timeout_ms": desc.timeout_ms,
        "age_s": age,
        "partitions": _partitions_text(desc.partitions),
    }


def _prepared(request: ResolutionRequest, access: StoreAccess) -> dict[str, Any]:
    """The PREPARED index this abort must respect (``ManifestStoreError`` if the store is unusable)."""
    from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import load_prepared

    return load_prepared(
        request.manifest_base_uri, protect=request.protect, source="--manifest-base / manifest_base_uri",
        access=access,
    )


# -- actions ------------------------------------------------------------------------------


def _list(admin: Any, request: ResolutionRequest, progress: Progress | None) -> ResolutionResult:
    listings = admin.list(
        prefixes=list(request.prefixes) or None,
        states=list(request.states) or None,
        min_age_ms=request.min_age_ms,
    )
    rows = [
        {"transactional_id": t.transactional_id, "producer_id": t.producer_id, "state": _value(t.state)}
        for t in sorted(listings, key=lambda t: t.transactional_id)
    ]
    return ResolutionResult(
        rows,
        f"{len(rows)} transaction(s)",
        True,
        ("transactional_id", "producer_id", "state"),
        warnings=_visibility_warnings(admin, request.prefixes),
    )


def _visibility_warnings(admin: Any, prefixes: Sequence[str]) -> list[str]:
    """Kafka hides what the principal may not DESCRIBE; say so instead of a silent short list."""
    from airflow_provider_kafka_eos.kafka.admin.acl_check import visibility_gaps

    wire = getattr(admin, "wire", None)
    return visibility_gaps(wire, list(prefixes)) if wire is not None else []


def _describe(admin: Any, request: ResolutionRequest, progress: Progress | None) -> ResolutionResult:
    if request.transactional_id:
        ids = [request.transactional_id]
    else:
        ids = sorted({t.transactional_id for t in admin.list(prefixes=list(request.prefixes))})
    descriptions = admin.describe(ids) if ids else {}
    rows = [_description_row(descriptions[i]) for i in ids if i in descriptions]
    return ResolutionResult(
        rows,
        f"{len(rows)} transaction(s) described",
        True,
        ("transactional_id", "state", "producer_id", "producer_epoch", "timeout_ms", "age_s", "partitions"),
    )


def _abort(
    admin: Any, request: ResolutionRequest, progress: Progress | None, access: StoreAccess
) -> ResolutionResult:
    """Abort one id (optionally compare-and-abort) or every Ongoing one under prefixes.

    The store is read before Kafka is asked anything, so an unusable store changes nothing.
    """
    from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import (
        DEFAULT_TRANSACTION_TIMEOUT_MS,
        AbortCandidate,
        AbortPolicy,
        plan_abort,
    )

    prepared = _prepared(request, access)
    if request.transactional_id:
        return _abort_one(admin, request, prepared)
    min_age = DEFAULT_TRANSACTION_TIMEOUT_MS if request.min_age_ms is None else request.min_age_ms
    lingering = admin.find_lingering(prefixes=list(request.prefixes), min_age_ms=0)
    now = _now_ms()
    plan = plan_abort(
        (AbortCandidate.of(d, now) for d in sorted(lingering, key=lambda d: d.transactional_id)),
        prepared=prepared,
        policy=AbortPolicy(protect=request.protect, prefixes=request.prefixes, min_age_ms=min_age),
    )
    verb = "would abort" if request.dry_run else "pending"
    rows = [
        {
            "transactional_id": v.transactional_id,
            "state": v.state,
            "producer_id": v.producer_id,
            "outcome": verb if v.abort else f"refused: {v.reason}",
        }
        for v in plan.verdicts
    ]
    columns = ("transactional_id", "state", "producer_id", "outcome")
    refused = len(plan.refused)
    to_abort = plan.to_abort
    if request.dry_run:
        return ResolutionResult(
            rows,
            f"dry run: would abort {len(to_abort)} transaction(s), {refused} refused "
            f"(minimum age {min_age // 1000} s); nothing was aborted",
            True,
            columns,
        )
    by_id = {r["transactional_id"]: r for r in rows}
    # One call for the whole plan: the admin groups it per coordinator and spreads a large group
    # over lanes (at least MIN_PER_LANE ids each), and reports each answer as it arrives.
    outcomes = admin.abort(list(to_abort), progress=progress) if progress else admin.abort(list(to_abort))
    for outcome in outcomes:
        by_id[outcome.transactional_id]["outcome"] = outcome.outcome
    aborted = sum(1 for r in rows if r["outcome"] == "aborted")
    return ResolutionResult(
        rows,
        f"aborted {aborted} of {len(to_abort)} transaction(s), {refused} refused "
        f"(minimum age {min_age // 1000} s)",
        True,
        columns,
    )


# A single abort of a transaction that is no longer open says how it ended (not an error).
_FINISHED = {
    "CompleteCommit": "already_committed",
    "CompleteAbort": "already_aborted",
    "Empty": "already_aborted",
}


def _abort_one(admin: Any, request: ResolutionRequest, prepared: dict[str, Any]) -> ResolutionResult:
    """One id: every check the real abort makes, also in a dry run; a refusal is an error."""
    from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import AbortCandidate, AbortPolicy, plan_abort

    txn_id = request.transactional_id
    assert txn_id is not None
    compare = request.producer_id is not None and request.epoch is not None
    desc = admin.describe([txn_id])[txn_id]  # UnknownTransactionError for an unknown id
    expected = {txn_id: (request.producer_id, request.epoch)} if compare else {}
    (verdict,) = plan_abort(
        [AbortCandidate.of(desc)],
        prepared=prepared,
        policy=AbortPolicy(protect=request.protect, expected=expected),
    ).verdicts
    columns = ("transactional_id", "state", "producer_id", "outcome")
    row = {"transactional_id": txn_id, "state": verdict.state, "producer_id": desc.producer_id}
    if not verdict.abort:
        if verdict.state != "Ongoing" and not compare:
            row["outcome"] = _FINISHED.get(verdict.state, "nothing to abort")
            return ResolutionResult([row], f"{txn_id}: {row['outcome']} ({verdict.reason})", True, columns)
        runbook = "commit-pending-transaction" if verdict.kind == "commit-pending" else "resolve-manually"
        raise KafkaEosError(f"refusing to abort: {verdict.reason}", transactional_id=txn_id, runbook=runbook)
    if request.dry_run:
        row["outcome"] = "would abort"
        return ResolutionResult(
            [row], f"dry run: {txn_id}: would abort ({verdict.reason}); nothing was aborted", True, columns
        )
    if compare:
        outcome = admin.abort_in_place(committable_for(admin, txn_id, desc.producer_id, desc.producer_epoch))
    else:
        (outcome,) = admin.abort([txn_id])
    row["outcome"] = outcome.outcome
    return ResolutionResult([row], f"{txn_id}: {outcome.outcome}", True, columns)


def _abort_checkpoint(
    admin: Any, request: ResolutionRequest, progress: Progress | None, access: StoreAccess
) -> ResolutionResult:
    """``--action abort --manifest URI``: abort what the checkpoint holds open, mark it ABORTED."""
    from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import abort_checkpoint

    assert request.manifest_uri is not None
    report = abort_checkpoint(admin, request.manifest_uri, dry_run=request.dry_run, progress=progress,
                              access=access)
    rows = [{"transactional_id": t, "outcome": o} for t, o in sorted(report.outcomes.items())]
    return ResolutionResult(rows, report.summary(), True, ("transactional_id", "outcome"))


def _capabilities(admin: Any) -> Any:
    """The cluster's capabilities through the admin's own connection (no second connection)."""
    from airflow_provider_kafka_eos.kafka.admin.capabilities import ClusterCapabilities

    return ClusterCapabilities.probe_with(admin.wire)


def committable_for(admin: Any, transactional_id: str, producer_id: int, epoch: int) -> Any:
    """A Committable for one id from DescribeTransactions plus the user's producer id / epoch.

    The coordinator knows the partitions and start time; the user supplies (pid, epoch) from
    the checkpoint manifest or an earlier ``describe``, which is what proves it is the
    transaction they mean. The record count is unknown here: each partition in a transaction
    holds at least one record, so the partition count is a true lower bound.
    """
    from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, TopicPartition

    desc = admin.describe([transactional_id])[transactional_id]
    partitions = tuple(TopicPartition(p.topic, p.partition) for p in desc.partitions)
    if not partitions:
        # Completed (or empty) transactions list no partitions; the commit's verification decides
        # whether that means "already committed" or "aborted". A placeholder keeps the type valid.
        partitions = (TopicPartition("<completed>", 0),)
    start = desc.start_time_ms if desc.start_time_ms is not None and desc.start_time_ms >= 0 else _now_ms()
    tv = 2 if admin.transaction_version() >= 2 else 1
    return Committable(
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=epoch,
        partitions=partitions,
        record_count=None,  # a hand-typed commit: nobody counted the records
        prepared_at_ms=_now_ms(),
        transaction_start_ms=start,
        transaction_timeout_ms=desc.timeout_ms if desc.timeout_ms and desc.timeout_ms > 0 else 1,
        transaction_version=tv,
        end_txn_version=admin.end_txn_version(),
    )


def _commit(admin: Any, request: ResolutionRequest, progress: Progress | None) -> ResolutionResult:
    """Commit one transaction by (id, producer id, epoch); a dry run runs the commit's verification."""
    assert (
        request.transactional_id is not None and request.producer_id is not None and request.epoch is not None
    )
    committable = committable_for(admin, request.transactional_id, request.producer_id, request.epoch)
    columns = ("transactional_id", "producer_id", "producer_epoch", "outcome")
    row = {
        "transactional_id": committable.transactional_id,
        "producer_id": committable.producer_id,
        "producer_epoch": committable.producer_epoch,
    }
    if request.dry_run:
        row["outcome"] = dry_run_outcome(admin, committable)
        return ResolutionResult(
            [row],
            f"dry run: {request.transactional_id}: {row['outcome']}; nothing was committed",
            True,
            columns,
        )
    (outcome,) = admin.commit([committable])
    row["outcome"] = outcome.outcome
    return ResolutionResult([row], f"{request.transactional_id}: {outcome.outcome}", True, columns)


def dry_run_outcome(admin: Any, committable: Any) -> str:
    """What a commit of ``committable`` would do: raises what the commit would raise.

    It asks what the commit asks, EndTxn(commit) with the recorded pair included (the verdict sends
    it only when the coordinator no longer holds that pair open, so it cannot commit anything: the
    coordinator answers from its own history), so a dry run fails exactly as the commit would.
    """
    verdict = admin.judge([committable], ask_coordinator=True)[committable.transactional_id]
    if verdict.error is not None:
        raise verdict.error
    return "already committed" if verdict.verdict is Verdict.COMMITTED else "would commit"


def _commit_from_manifest(
    admin: Any, request: ResolutionRequest, progress: Progress | None, access: StoreAccess
) -> ResolutionResult:
    """Commit a checkpoint from its manifest and mark it (``checkpoint.commit_checkpoint``)."""
    from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint
    from airflow_provider_kafka_eos.kafka.checkpoints.manifest import read_manifest

    assert request.manifest_uri is not None
    report = commit_checkpoint(
        admin,
        request.manifest_uri,
        committed_by="kafka-eos-txn resolution",
        dry_run=request.dry_run,
        progress=progress,
        access=access,
    )
    manifest = read_manifest(request.manifest_uri, access=access)
    columns = ("transactional_id", "producer_id", "producer_epoch", "record_count", "outcome")
    rows = [
        {
            "transactional_id": c.transactional_id,
            "producer_id": c.producer_id,
            "producer_epoch": c.producer_epoch,
            "record_count": c.record_count,
            "outcome": _outcome_text(report.status, report.transaction_outcomes.get(c.transactional_id)),
        }
        for c in manifest.committables
    ]
    return ResolutionResult(rows, report.summary(), True, columns)


def _outcome_text(status: str, outcome: str | None) -> str:
    """What this process did to one transaction (a row says that, not what an earlier committer did)."""
    if status == "would_commit":
        return "already committed" if outcome == "already_committed" else "would commit"
    if status == "already_committed":  # the report's outcomes are the earlier committer's: nothing sent
        return "already_committed"
    return outcome or "already_committed"


def _find_hanging(
    admin: Any, request: ResolutionRequest, progress: Progress | None, access: StoreAccess
) -> ResolutionResult:
    if request.topics:
        return _find_hanging_partitions(admin, request)
    min_age = DEFAULT_HANGING_MIN_AGE_MS if request.min_age_ms is None else request.min_age_ms
    lingering = admin.find_lingering(prefixes=list(request.prefixes) or None, min_age_ms=min_age)
    from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import load_prepared

    prepared = load_prepared(request.manifest_base_uri, access=access) if request.manifest_base_uri else {}
    protected = {tid: ref.manifest_uri for tid, ref in prepared.items()}
    rows = []
    for desc in sorted(lingering, key=lambda d: d.transactional_id):
        row = _description_row(desc)
        row["next_step"] = (
            f"commit from manifest {protected[desc.transactional_id]}"
            if desc.transactional_id in protected
            else (
                "abort (no PREPARED manifest lists it)"
                if request.manifest_base_uri
                else "abort (if no manifest lists it; pass --manifest-base to check)"
            )
        )
        rows.append(row)
    pinned = _lso_stalls(admin, lingering)
    for row in rows:
        row["lso_stalled"] = ",".join(pinned.get(row["producer_id"], []))
    return ResolutionResult(
        rows,
        f"{len(rows)} transaction(s) open longer than {min_age // 1000} s",
        True,
        warnings=_visibility_warnings(admin, request.prefixes),
        columns=(
            "transactional_id",
            "state",
            "producer_id",
            "producer_epoch",
            "age_s",
            "partitions",
            "lso_stalled",
            "next_step",
        ),
    )


def _lso_stalls(admin: Any, lingering: Sequence[Any]) -> dict[int, list[str]]:
    """Producer id -> partitions ("topic-p (N behind)") whose last stable offset it pins."""
    from airflow_provider_kafka_eos.kafka.admin.lso import lso_probe

    partitions = sorted({(p.topic, p.partition) for d in lingering for p in d.partitions})
    if not partitions:
        return {}
    pinned: dict[int, list[str]] = {}
    for status in lso_probe(admin, partitions):
        blocking = status.blocking
        if status.stalled and blocking is not None:
            pinned.setdefault(blocking.producer_id, []).append(
                f"{status.topic}-{status.partition} ({status.behind} behind)"
            )
    return pinned


def _preflight(
    admin: Any, request: ResolutionRequest, progress: Progress | None, config: Any
) -> ResolutionResult:
    """Capabilities + the ACLs of ``config``'s principal (+ the timeout limit when one is given)."""
    from airflow_provider_kafka_eos.kafka.admin.acl_check import (
        check_acls,
        pipeline_requirements,
        principal_of,
    )
    from airflow_provider_kafka_eos.kafka.operations.preflight import (
        PreflightReport,
        check_acl_findings,
        check_transaction_timeout,
        check_two_phase_commit,
    )

    caps = _capabilities(admin)
    checks = []
    acls_dict = []
    two_pc = request.two_phase_commit
    acls_by_prefix = {}
    for prefix in request.prefixes:
        requirements = pipeline_requirements(prefix, request.topics, two_phase_commit=two_pc)
        acls = check_acls(admin.wire, requirements, principal_of(config) if config is not None else None)
        acls_by_prefix[prefix] = acls
        acls_dict.append(acls.to_dict())
        checks.extend(check_acl_findings(acls))
    if request.transaction_timeout_ms is not None:
        checks.append(check_transaction_timeout(request.transaction_timeout_ms, caps))
    # With --two-phase-commit every prefix's TWO_PHASE_COMMIT ACL is judged (and 2PC is required).
    for prefix in request.prefixes if two_pc else request.prefixes[:1]:
        checks.extend(
            check_two_phase_commit(
                caps,
                acls_by_prefix[prefix] if two_pc else None,
                prefix,
                request.transaction_timeout_ms or 0,
                required=two_pc,
            )
        )
    report = PreflightReport(checks, caps.to_dict(), {"checks": acls_dict})
    rows = [
        {
            "check": c.name,
            "status": c.status,
            "message": c.message,
            "runbook": runbook_reference(c.runbook) if c.runbook else "",
        }
        for c in report.checks
    ]
    return ResolutionResult(
        rows,
        ("preflight OK" if report.ok else "preflight FAILED") + "\n" + caps.render(),
        report.ok,
        ("check", "status", "message", "runbook"),
    )


# -- hanging partitions (KIP-664) ---------------------------------------------------------------

_PARTITION_COLUMNS = (
    "topic",
    "partition",
    "producer_id",
    "producer_epoch",
    "txn_start_offset",
    "holds_lso",
    "transactional_id",
    "coordinator_state",
    "next_step",
)


def _partitions_of(admin: Any, request: ResolutionRequest) -> list[tuple[str, int]]:
    """``--topic`` (every partition of it, from metadata) or ``--topic`` with ``--partition``."""
    from airflow_provider_kafka_eos.kafka.admin.hanging import topic_partitions

    if request.partition is not None:
        return [(t, request.partition) for t in request.topics]
    return topic_partitions(admin, request.topics)


def _find_hanging_partitions(admin: Any, request: ResolutionRequest) -> ResolutionResult:
    """``find-hanging --topic T [--partition N]``: every open transaction on the partitions, marked
    hanging when no coordinator entry will end it (:mod:`~airflow_provider_kafka_eos.kafka.admin.hanging`)."""
    from airflow_provider_kafka_eos.kafka.admin.hanging import open_transactions

    rows = []
    for txn in open_transactions(admin, _partitions_of(admin, request)):
        row = txn.to_row()
        row["next_step"] = (
            f"abort-partition --topic {txn.topic} --partition {txn.partition} "
            f"--producer-id {txn.producer_id} --epoch {txn.producer_epoch}"
            if txn.hanging
            else f"owned by {txn.transactional_id} ({txn.coordinator_state}): see find-hanging --prefix"
        )
        rows.append(row)
    hanging = sum(1 for r in rows if r["hanging"])
    return ResolutionResult(
        rows,
        f"{len(rows)} open transaction(s) on {', '.join(request.topics)}, {hanging} hanging "
        "(no coordinator entry)",
        True,
        _PARTITION_COLUMNS,
    )


def _abort_partition(
    admin: Any, request: ResolutionRequest, progress: Progress | None, access: StoreAccess
) -> ResolutionResult:
    """KIP-664 admin abort of one partition's open transaction (WriteTxnMarkers, no JVM tool).

    The manifest store is read first, as for every abort: a producer id a PREPARED manifest lists
    is refused (its batch must commit). Then the partition's open transactions are read; the
    target must be one of them, and one its coordinator no longer owns (else ``abort
    --transactional-id`` is the way, and ``--force`` the explicit way around).
    """
    from airflow_provider_kafka_eos.kafka.admin.hanging import abort_on_partition, open_transactions

    prepared = _prepared(request, access)
    topic, partition = request.topics[0], request.partition
    assert partition is not None
    where = f"{topic}-{partition}"
    opened = open_transactions(admin, [(topic, partition)])
    if request.producer_id is None:
        hanging = [t for t in opened if t.hanging]
        if len(hanging) != 1:
            raise UsageError(
                f"{where} has {len(hanging)} hanging transaction(s) (of {len(opened)} open): name the one "
                f"to abort with --producer-id and --epoch (see `kafka-eos-txn find-hanging --topic {topic}`)"
            )
        target = hanging[0]
    else:
        matching = [t for t in opened if t.producer_id == request.producer_id]
        if not matching:
            raise KafkaEosError(
                f"{where} has no open transaction of producer id {request.producer_id} (open: "
                f"{', '.join(str(t.producer_id) for t in opened) or 'none'}); nothing was aborted",
                runbook="consumers-stuck-at-lso",
            )
        target = matching[0]
        if target.producer_epoch != request.epoch:
            raise KafkaEosError(
                f"producer id {target.producer_id} holds {where} open with epoch {target.producer_epoch}, "
                f"not {request.epoch}; nothing was aborted",
                runbook="consumers-stuck-at-lso",
            )
    for ref in prepared.values():
        if ref.producer_id == target.producer_id:
            raise KafkaEosError(
                f"refusing to abort {where}: producer id {target.producer_id} is listed in the PREPARED "
                f"manifest {ref.manifest_uri} (checkpoint {ref.checkpoint_id}); commit it with "
                f"`kafka-eos-txn commit --manifest {ref.manifest_uri}`",
                runbook="commit-pending-transaction",
            )
    if not target.hanging and not request.force:
        raise KafkaEosError(
            f"refusing to abort {where}: its coordinator still owns producer id {target.producer_id} as "
            f"{target.transactional_id} ({target.coordinator_state}), so it is not hanging; abort it with "
            f"`kafka-eos-txn abort --transactional-id {target.transactional_id}` (or pass --force)",
            transactional_id=target.transactional_id,
            runbook="consumers-stuck-at-lso",
        )
    row = target.to_row()
    if request.dry_run:
        row["outcome"] = "would abort"
        summary = f"dry run: {where}: would abort producer id {target.producer_id}; nothing was aborted"
    else:
        abort_on_partition(admin, target)
        if progress:
            progress(1, 1, "aborting")
        row["outcome"] = "aborted"
        summary = f"{where}: aborted the open transaction of producer id {target.producer_id}"
    return ResolutionResult([row], summary, True, (*_PARTITION_COLUMNS[:-1], "outcome"))
