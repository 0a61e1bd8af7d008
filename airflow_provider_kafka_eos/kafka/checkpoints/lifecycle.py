"""A checkpoint's transitions: commit-and-mark, the commit-or-give-up decision, mark-ABORTED.

A checkpoint manifest is the vote of the two-phase commit. Every change of a manifest's status
goes through this module, so that the writer's restore, the commit operator, the abort operator,
the sensor, the CLI / manual DAG and the cleanup DAG can never disagree:

- :func:`commit_checkpoint`: commit a manifest's transactions and mark it COMMITTED, returning
  one :class:`CommitReport` (also for dry runs and already-committed checkpoints);
- :func:`mark_aborted`: the only way a manifest becomes ABORTED; :func:`abort_checkpoint` aborts
  what one manifest still holds open and marks it.

The store these manifests live in is ``store.py`` (:class:`ManifestStore`, the PREPARED index);
which open transactions an abort may touch is ``abort_plan.py`` (:func:`plan_abort`).

Marking a manifest is a compare-and-set (:func:`_transition`: read the manifest and its version,
decide, write only if it is still that version, else read again and decide again;
``store_objects.py`` says how each store does it), so concurrent committers, or a committer and
a give-up, leave a truthful manifest: a later ``already_committed`` never overwrites the report
of the commit that really happened, and a checkpoint is never both COMMITTED and ABORTED.

No Airflow imports: the Spark driver and the CLI use it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    Decision,
    Manifest,
    ManifestStatus,
    manifest_bytes,
    read_manifest,
    store_unreachable,
)
from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import (
    STANDARD_CHAIN,
    StoreAccess,
    read_versioned,
    replace_if,
)
from airflow_provider_kafka_eos.kafka.errors import (
    DataLossError,
    KafkaEosError,
    ManifestError,
)
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import (
    TransactionDescription,
    TxnOutcome,
    wall_clock_ms,
)
from airflow_provider_kafka_eos.kafka.protocol.verdicts import GroupEffect, TxnVerdict, Verdict


class CheckpointAdmin(Protocol):
    """What a checkpoint's transitions need of the admin handed in (a TransactionAdmin): the
    verdict of each transaction, commit and abort. A Protocol: ``kafka/checkpoints`` does not
    import its sibling ``kafka/admin``."""

    def describe(
        self, ids: Iterable[str], *, missing_ok: bool = False
    ) -> dict[str, TransactionDescription]: ...

    def judge(
        self, committables: Sequence[Committable], *, ask_coordinator: bool,
        descriptions: dict[str, TransactionDescription] | None = None,
        group_effects: Mapping[str, GroupEffect] | None = None,
    ) -> dict[str, TxnVerdict]: ...

    def commit(
        self, committables: Sequence[Committable], *, max_workers: int = 16, lanes: int | None = None,
        progress: Callable[[int, int, str], None] | None = None,
        group_effects: Mapping[str, GroupEffect] | None = None,
    ) -> list[TxnOutcome]: ...

    def abort(
        self, ids: Iterable[str], *, max_workers: int = 16, lanes: int | None = None,
        progress: Callable[[int, int, str], None] | None = None,
    ) -> list[TxnOutcome]: ...

__all__ = [
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "CheckpointAbortReport",
    "CommitReport",
    "abort_checkpoint",
    "commit_checkpoint",
    "effects_kw",
    "mark_aborted",
]

log = logging.getLogger(__name__)

# Kafka's default transaction.max.timeout.ms: the longest timeout a default broker accepts. The
# one source for the writer's default timeout and for the default minimum age of a bulk abort.
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000


# -- commit-and-mark --------------------------------------------------------------------------


@dataclass
class CommitReport:
    """What committing one checkpoint did (or would do). JSON-able, no secrets.

    ``status``: ``committed`` (this call sent the commit), ``already_committed`` (committed before:
    by an earlier try, restore, or a concurrent committer), ``would_commit`` (dry run).
    ``transaction_outcomes``: transactional id -> ``committed`` / ``already_committed`` (dry run:
    ``commit`` / ``already_committed``); ``outcomes`` counts them.
    """

    manifest_uri: str
    pipeline_id: str
    checkpoint_id: int
    topic: str
    status: str
    committed_by: str
    transactions: int
    records: int | None
    transaction_outcomes: dict[str, str] = field(default_factory=dict)
    commit_latency_ms: int = 0
    prepare_to_commit_ms: int = 0
    committed_at_ms: int = 0
    input_id: str | None = None  # the input the checkpoint carries (None: unknown, e.g. an older manifest)
    # transactional id -> [producer id, epoch] the coordinator answered or held when the commit ended:
    # under TV2 not the committable's pair (every completion bumps the epoch, and at the epoch limit
    # rotates the producer id), so every later reader sees a rotation (``kafka/admin/verdict.py``).
    answered_pairs: dict[str, list[int]] = field(default_factory=dict)

    @property
    def outcomes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for outcome in self.transaction_outcomes.values():
            counts[outcome] = counts.get(outcome, 0) + 1
        return counts

    @property
    def sent_commit(self) -> bool:
        """Whether this report's author committed at least one transaction itself."""
        return "committed" in self.transaction_outcomes.values()

    def summary(self) -> str:
        carries = f", input {self.input_id!r}" if self.input_id is not None else ""
        what = f"checkpoint {self.checkpoint_id} of {self.pipeline_id}{carries} ({self.manifest_uri})"
        if self.status == "would_commit":
            return (
                f"dry run: would commit {self.transactions} transaction(s) of {what}; nothing was committed"
            )
        if self.status == "already_committed":
            return f"{what} was already committed (by {self.committed_by}); nothing to do"
        return (
            f"committed {self.transactions} transaction(s) of {what}; manifest marked COMMITTED "
            f"(outcomes {self.outcomes})"
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["outcomes"] = self.outcomes
        data["transactional_ids"] = sorted(self.transaction_outcomes)
        data["already_committed"] = self.status == "already_committed"
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CommitReport:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


def _records(manifest: Manifest) -> int | None:
    counts = [c.record_count for c in manifest.output_committables]
    return None if any(n is None for n in counts) else sum(counts)


def _report(
    uri: str,
    manifest: Manifest,
    status: str,
    by: str,
    outcomes: Mapping[str, str],
    started_ms: int,
    finished_ms: int,
) -> CommitReport:
    prepared_at = max((c.prepared_at_ms for c in manifest.committables), default=started_ms)
    return CommitReport(
        manifest_uri=uri,
        pipeline_id=manifest.pipeline_id,
        checkpoint_id=manifest.checkpoint_id,
        topic=manifest.topic,
        status=status,
        committed_by=by,
        transactions=len(manifest.committables),
        records=_records(manifest),
        transaction_outcomes=dict(outcomes),
        commit_latency_ms=finished_ms - started_ms,
        prepare_to_commit_ms=finished_ms - prepared_at,
        committed_at_ms=finished_ms,
        input_id=manifest.input.id if manifest.input is not None else None,
    )


def _previous_report(uri: str, manifest: Manifest) -> CommitReport:
    """The report of a manifest that is COMMITTED already (whoever committed it)."""
    data = dict(manifest.commit_report or {})
    report = _report(
        uri,
        manifest,
        "already_committed",
        str(data.get("committed_by", "unknown")),
        _stored_outcomes(data),
        manifest.updated_at_ms,
        manifest.updated_at_ms,
    )
    pairs = data.get("answered_pairs")
    if isinstance(pairs, dict):
        report.answered_pairs = {str(k): list(v) for k, v in pairs.items() if isinstance(v, list)}
    return report


def _stored_outcomes(data: Mapping[str, Any]) -> dict[str, str]:
    """Transactional id -> outcome from a stored report (older releases kept them under ``outcomes``)."""
    for key in ("transaction_outcomes", "outcomes"):
        value = data.get(key)
        if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            return dict(value)
    return {}


def _refuse_aborted(uri: str, manifest: Manifest) -> DataLossError:
    first = manifest.committables[0].transactional_id if manifest.committables else None
    return DataLossError(
        f"checkpoint {manifest.checkpoint_id} ({uri}) is ABORTED: its transactions were lost before they "
        "could be committed; rerun the checkpoint to produce it again",
        transactional_id=first,
        runbook="rerun-a-checkpoint",
    )


_PLANNED = {Verdict.COMMITTED: "already_committed", Verdict.OPEN: "commit"}


def verify_checkpoint(admin: CheckpointAdmin, manifest: Manifest) -> dict[str, str]:
    """The commit's own verification, changing nothing: id -> ``commit`` / ``already_committed``.

    Raises what the real commit would raise (DataLossError, TransactionTimeoutRiskError,
    UnknownTransactionError, VerdictUnknownError, ...), so a dry run fails the same way.
    """
    if not manifest.committables:
        return {}
    ids = [c.transactional_id for c in manifest.committables]
    descriptions = admin.describe(ids)  # an unknown id is refused, as the commit refuses it
    plan: dict[str, str] = {}
    # The commit's own question included (it cannot commit anything: see ``resolution.dry_run_outcome``).
    for tid, verdict in admin.judge(manifest.committables, ask_coordinator=True, **effects_kw(manifest),
                                    descriptions=descriptions).items():
        if verdict.error is not None:
            raise verdict.error
        plan[tid] = _PLANNED[verdict.verdict]
    return plan


def commit_checkpoint(
    admin: CheckpointAdmin,
    uri: str,
    *,
    committed_by: str,
    dry_run: bool = False,
    max_workers: int = 16,
    now_ms: Callable[[], int] = wall_clock_ms,
    progress: Callable[[int, int, str], None] | None = None,
    access: StoreAccess = STANDARD_CHAIN,
) -> CommitReport:
    """Commit every transaction of the manifest at ``uri`` and mark it COMMITTED (commit-and-mark).

    A COMMITTED manifest is reported as ``already_committed`` without touching Kafka (``admin``
    is not used then, and may be None); an ABORTED one raises DataLossError. All or nothing:
    ``TransactionAdmin.commit`` verifies every committable before the first EndTxn. A dry run
    runs the same verification and raises the same error. A failed commit leaves the manifest
    PREPARED (restore decides about it). ``access``: how this process reaches the store (the
    hook's ``manifest_store(...).access``).
    """
    manifest = read_manifest(uri, access=access)
    if manifest.status is ManifestStatus.COMMITTED:
        return _previous_report(uri, manifest)
    if manifest.status is ManifestStatus.ABORTED:
        raise _refuse_aborted(uri, manifest)
    started = now_ms()
    if dry_run:
        plan = verify_checkpoint(admin, manifest)
        status = (
            "already_committed"
            if plan and all(v == "already_committed" for v in plan.values())
            else "would_commit"
        )
        return _report(uri, manifest, status, committed_by, plan, started, now_ms())
    _decide(uri, "commit", committed_by, now_ms, access)  # a give-up decided first wins; nothing is sent then
    outcomes = (
        admin.commit(manifest.committables, max_workers=max_workers, **_progress_kw(progress),
                     **effects_kw(manifest))
        if manifest.committables
        else []
    )
    finished = now_ms()
    by_id = {o.transactional_id: o.outcome for o in outcomes}
    mine = "committed" if "committed" in by_id.values() or not by_id else "already_committed"
    report = _report(uri, manifest, mine, committed_by, by_id, started, finished)
    report.answered_pairs = {o.transactional_id: [o.producer_id, o.producer_epoch] for o in outcomes
                             if o.producer_id is not None and o.producer_epoch is not None}
    return _mark_committed(uri, report, finished, access)


def _mark_committed(uri: str, report: CommitReport, at_ms: int,
                    access: StoreAccess = STANDARD_CHAIN) -> CommitReport:
    """Write COMMITTED + report as a compare-and-set, keeping the truth when racing.

    If a concurrent committer marked it first: a report of ours that committed nothing itself
    (``already_committed``) never replaces theirs; one that did replaces a report that did not;
    when both committed some transactions, the per-transaction outcomes are merged. A give-up
    that marked it ABORTED first is a DataLossError (nothing reported that did not happen).
    """

    def decide(current: Manifest) -> Manifest | None:
        if current.status is ManifestStatus.ABORTED:
            raise _refuse_aborted(uri, current)
        if current.status is ManifestStatus.COMMITTED:
            theirs = _previous_report(uri, current)
            if not report.sent_commit:
                log.info("%s was marked COMMITTED concurrently (by %s); its report is kept", uri,
                         theirs.committed_by)
                return None
            if theirs.sent_commit:
                merged = dict(report.transaction_outcomes)
                merged.update({t: o for t, o in theirs.transaction_outcomes.items() if o == "committed"})
                report.transaction_outcomes = merged
                report.committed_by = f"{theirs.committed_by} and {report.committed_by}"
        current.status = ManifestStatus.COMMITTED
        current.updated_at_ms = at_ms
        current.commit_report = report.to_dict()
        return current

    _transition(uri, decide, access)
    return report


def _decide(uri: str, outcome: str, by: str, now_ms: Callable[[], int],
            access: StoreAccess = STANDARD_CHAIN, *, over_commit: bool = False) -> None:
    """Record the decision (commit or give up) in the manifest before acting on it in Kafka.

    A compare-and-set: of a commit and a give-up racing for one PREPARED checkpoint, exactly one
    decision stands, and the other refuses before it has sent anything (without it, the commit
    could commit one partition's transaction while the give-up aborted another's). The same
    decision again (concurrent committers; a give-up resumed) is no conflict: both go on, and
    EndTxn / fencing are idempotent. ``over_commit``: a give-up replaces a commit decision, for a
    checkpoint whose every transaction the verdict proved aborted (the commit can never succeed).
    """

    def decide(current: Manifest) -> Manifest | None:
        if current.status is ManifestStatus.ABORTED:
            raise _refuse_aborted(uri, current)
        if current.status is ManifestStatus.COMMITTED:
            if outcome == "abort":
                raise KafkaEosError(f"manifest {uri} is COMMITTED: its records are visible and cannot be "
                                    "aborted", runbook="resolve-manually")
            return None
        made = current.decision
        if made is not None and made.outcome == outcome:
            return None
        if made is not None and made.outcome == "commit" and outcome == "abort" and over_commit:
            log.warning("%s: the commit decided by %s can never succeed (every transaction was aborted): "
                        "given up by %s instead", uri, made.by, by)
            made = None
        when = datetime.fromtimestamp(made.at_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") \
            if made is not None else ""
        if made is not None and outcome == "commit":
            raise DataLossError(
                f"checkpoint {current.checkpoint_id} ({uri}) was given up by {made.by} at {when} before this "
                "commit started: nothing was committed. Rerun the checkpoint to produce it again",
                runbook="rerun-a-checkpoint")
        if made is not None:
            raise KafkaEosError(
                f"checkpoint {current.checkpoint_id} ({uri}) is being committed ({made.by} decided to commit "
                f"at {when}): it cannot be given up; nothing was aborted. Let the commit finish "
                f"(kafka-eos-txn commit --manifest {uri} completes it)",
                runbook="commit-pending-transaction")
        current.decision = Decision(outcome, by, now_ms())
        current.updated_at_ms = current.decision.at_ms
        return current

    _transition(uri, decide, access)


def _transition(uri: str, decide: Callable[[Manifest], Manifest | None],
                access: StoreAccess = STANDARD_CHAIN, *, attempts: int = 20) -> None:
    """Compare-and-set one manifest: ``decide`` sees the current manifest and returns the new one
    (or None: nothing to write); written only if nobody changed it meanwhile, else decided again.

    ``decide`` may raise to refuse. Each lost race means another writer succeeded, so the loop
    ends; ``attempts`` bounds it anyway (a store that never accepts a precondition is an error).
    """
    for _ in range(attempts):
        try:
            found = read_versioned(uri, access=access)
        except OSError as exc:
            raise store_unreachable(uri, exc, "read", "; nothing was changed") from None
        if found is None:
            raise ManifestError(f"{uri}: manifest does not exist")
        data, version = found
        current = Manifest.from_json(data, source=uri)
        current.uri = uri
        new = decide(current)
        if new is None:
            return
        try:
            if replace_if(uri, manifest_bytes(new, uri), version, access=access):
                return
        except OSError as exc:
            raise store_unreachable(uri, exc, "written", "; nothing was changed") from None
        log.info("%s changed while it was being updated; reading it again", uri)
    raise ManifestError(f"{uri}: the manifest kept changing under {attempts} updates; nothing was changed "
                        "by this one. Check who else writes it (kafka-eos-txn checkpoints)")


# -- mark-ABORTED and abort-a-checkpoint -----------------------------------------------------


def mark_aborted(
    uri: str,
    reasons: Sequence[str],
    *,
    aborted_by: str,
    now_ms: Callable[[], int] = wall_clock_ms,
    access: StoreAccess = STANDARD_CHAIN,
) -> None:
    """Mark the manifest ABORTED with the reasons (the only writer of ABORTED).

    Refuses a manifest that became COMMITTED meanwhile (its data is visible: nothing was lost).
    """
    def decide(current: Manifest) -> Manifest | None:
        if current.status is ManifestStatus.ABORTED:
            return None
        if current.status is ManifestStatus.COMMITTED:
            raise KafkaEosError(
                f"manifest {uri} is COMMITTED; it cannot be marked ABORTED", runbook="resolve-manually"
            )
        current.status = ManifestStatus.ABORTED
        current.updated_at_ms = now_ms()
        current.commit_report = {"aborted_by": aborted_by, "reasons": list(reasons)}
        return current

    _transition(uri, decide, access)


@dataclass
class CheckpointAbortReport:
    manifest_uri: str
    checkpoint_id: int
    status: str  # aborted | already_aborted | would_abort
    outcomes: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        if self.status == "already_aborted":
            return f"checkpoint {self.checkpoint_id} ({self.manifest_uri}) was already ABORTED; nothing to do"
        verb = "would abort" if self.status == "would_abort" else "aborted"
        return (
            f"{verb} checkpoint {self.checkpoint_id} ({self.manifest_uri}): "
            f"{len(self.outcomes)} transaction(s)"
            + ("; nothing was changed" if self.status == "would_abort" else "; manifest marked ABORTED")
        )


def abort_checkpoint(
    admin: CheckpointAdmin,
    uri: str,
    *,
    dry_run: bool = False,
    aborted_by: str = "kafka-eos-txn",
    progress: Callable[[int, int, str], None] | None = None,
    access: StoreAccess = STANDARD_CHAIN,
) -> CheckpointAbortReport:
    """Abort what the manifest at ``uri`` still holds open, then mark it ABORTED.

    The user named this checkpoint, so PREPARED protection does not apply to it; but a
    transaction that was committed (part of the batch is visible) refuses the whole abort, and an
    id another producer holds now is left alone (it is no longer this checkpoint's transaction).
    """
    manifest = read_manifest(uri, access=access)
    report = CheckpointAbortReport(uri, manifest.checkpoint_id, "already_aborted")
    if manifest.status is ManifestStatus.ABORTED:
        return report
    if manifest.status is ManifestStatus.COMMITTED:
        raise KafkaEosError(
            f"manifest {uri} is COMMITTED: its records are visible and cannot be aborted",
            runbook="resolve-manually",
        )
    verdicts = admin.judge(manifest.committables, ask_coordinator=False, **effects_kw(manifest))
    mine: list[str] = []
    for c in manifest.committables:
        verdict = verdicts[c.transactional_id]
        if verdict.verdict is Verdict.COMMITTED:  # committed, or a commit under way
            raise KafkaEosError(
                f"checkpoint {manifest.checkpoint_id} ({uri}) is partly committed ({c.transactional_id}: "
                f"{verdict.evidence}); aborting the rest would lose part of it: commit it with kafka-eos-txn "
                f"commit --manifest {uri}",
                transactional_id=c.transactional_id,
                runbook="commit-pending-transaction",
            )
        if verdict.verdict is Verdict.UNKNOWN and verdict.error is not None:
            raise verdict.error
        if verdict.verdict is Verdict.OPEN:
            mine.append(c.transactional_id)
            report.outcomes[c.transactional_id] = "would abort" if dry_run else "pending"
        else:
            report.outcomes[c.transactional_id] = f"nothing to abort ({verdict.evidence})"
    if dry_run:
        report.status = "would_abort"
        return report
    # A commit decided first wins (nothing is aborted then), unless the verdict proved every
    # transaction of the checkpoint aborted: then no commit can ever succeed and the give-up is the way on.
    lost = all(v.verdict is Verdict.ABORTED for v in verdicts.values())
    _decide(uri, "abort", aborted_by, wall_clock_ms, access, over_commit=lost)
    for outcome in admin.abort(mine, **_progress_kw(progress)) if mine else []:
        report.outcomes[outcome.transactional_id] = outcome.outcome
    committed = sorted(t for t, o in report.outcomes.items() if o == "already_committed")
    if committed:  # a commit won the race between our look and our abort: say what really happened
        aborted = sorted(t for t, o in report.outcomes.items() if o == "aborted")
        raise (DataLossError if aborted else KafkaEosError)(
            f"checkpoint {manifest.checkpoint_id} ({uri}) was committed by someone else while it was being "
            f"given up: {', '.join(committed)} committed"
            + (f", {', '.join(aborted)} aborted by this give-up (that part of the batch is lost)" if aborted
               else "; nothing was aborted and the manifest is left for the commit to mark"),
            transactional_id=committed[0],
            runbook="data-loss" if aborted else "commit-pending-transaction",
        )
    mark_aborted(uri, [f"aborted on request ({aborted_by})"], aborted_by=aborted_by, access=access)
    report.status = "aborted"
    return report


def effects_kw(manifest: Manifest) -> dict[str, Any]:
    """``group_effects=`` for a Kafka-input checkpoint: its offsets transaction's data is the group's
    committed offsets (the verdict reads them); nothing for other checkpoints (admins handed in by
    tests may not take the keyword)."""
    kafka = manifest.input.kafka if manifest.input is not None else None
    if kafka is None or not kafka.offsets_transactional_id:
        return {}
    return {"group_effects": {kafka.offsets_transactional_id: kafka.group_effect()}}


def _progress_kw(progress: Callable[[int, int, str], None] | None) -> dict[str, Any]:
    """``progress=`` only when a caller asked for it: admins handed in by tests may not take it."""
    return {} if progress is None else {"progress": progress}
