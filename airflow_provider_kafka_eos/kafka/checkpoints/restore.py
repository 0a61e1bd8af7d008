"""Restore before a checkpoint is written: finish what earlier attempts of the pipeline left.

The manifest is the vote of the two-phase commit. Before a Spark job prepares checkpoint
``c`` of a pipeline, the state the pipeline's earlier runs left behind is settled:

1. every PREPARED manifest of another checkpoint is committed (it was voted; its commit task
   may have died) and marked COMMITTED;
2. a manifest for checkpoint ``c`` itself that is PREPARED and still committable, or
   COMMITTED, is returned as is: the job must not produce again. This is what makes a
   retried submit task, or a cleared and rerun DAG run, idempotent;
3. a PREPARED manifest that can no longer be committed (the broker aborted or timed out one
   of its transactions) is marked ABORTED and logged as data loss; for checkpoint ``c`` the
   job then produces the checkpoint again (nothing of it was visible);
4. every other open transaction under the pipeline's transactional-id prefix (left by a
   crashed job, a killed task, a job with more partitions than today's) is aborted by
   fencing, never one listed in a PREPARED manifest and never one outside the prefix. Only
   right while no other run prepares the pipeline: the writer holds the writer lease;
5. the same for the checkpoint's own ids that the prefix does not generate (``also_owned``: a
   Kafka-input checkpoint's offsets transaction ``<prefix>-offsets``): a dead attempt's open
   transaction is fenced when no PREPARED manifest lists it and no COMMITTED manifest holds its
   producer id and epoch. Same rule (``plan_abort``), same owner (the prefix's pipeline).

No Airflow imports: the Spark driver runs this.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_provider_kafka_eos.kafka.checkpoints.abort_plan import AbortCandidate, AbortPolicy, plan_abort
from airflow_provider_kafka_eos.kafka.checkpoints.abort_strategies import AbortingAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import (
    CheckpointAdmin,
    commit_checkpoint,
    effects_kw,
    mark_aborted,
)
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import Manifest, ManifestStatus, read_manifest
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore, PreparedRef, prepared_index
from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import STANDARD_CHAIN, StoreAccess
from airflow_provider_kafka_eos.kafka.errors import DataLossError, VerdictUnknownError
from airflow_provider_kafka_eos.kafka.protocol.verdicts import TxnVerdict, Verdict, checkpoint_verdict
from airflow_provider_kafka_eos.runbook import reference as runbook_reference


class RestoreAdmin(CheckpointAdmin, AbortingAdmin, Protocol):
    """What a restore needs of the admin handed in (a TransactionAdmin): a checkpoint's transitions
    (it recommits and aborts) and the abort strategies it runs. A Protocol: ``kafka/checkpoints``
    does not import its sibling ``kafka/admin``."""

__all__ = ["RestoreReport", "restore_pipeline", "settle_before_planning"]

log = logging.getLogger(__name__)


@dataclass
class RestoreReport:
    """What restore did; ``existing`` is set when this checkpoint must not be produced again."""

    checkpoint_id: int
    existing_uri: str | None = None
    existing: Manifest | None = None
    recommitted: list[str] = field(default_factory=list)  # manifest uris committed by restore
    marked_aborted: list[str] = field(default_factory=list)  # manifest uris that lost their data
    aborted_transactions: list[str] = field(default_factory=list)
    protected_transactions: list[str] = field(default_factory=list)
    # How restore reaches the store (the store's own access); not part of the report's content.
    access: StoreAccess = field(default=STANDARD_CHAIN, repr=False, compare=False)

    def summary(self) -> str:
        text = (f"restore before checkpoint {self.checkpoint_id}: {len(self.recommitted)} prepared "
                f"manifest(s) committed, {len(self.marked_aborted)} marked ABORTED, "
                f"{len(self.aborted_transactions)} open transaction(s) aborted")
        if self.existing is not None:
            text += (f"; checkpoint already {self.existing.status.value} at {self.existing_uri}: "
                     "not producing again")
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "checkpoint_id": self.checkpoint_id,
            "existing_uri": self.existing_uri,
            "existing_status": self.existing.status.value if self.existing else None,
            "recommitted": list(self.recommitted),
            "marked_aborted": list(self.marked_aborted),
            "aborted_transactions": list(self.aborted_transactions),
        }


def restore_pipeline(
    admin: RestoreAdmin,
    *,
    store: ManifestStore,
    manifests: Sequence[tuple[str, Manifest]],
    pipeline_id: str,
    transactional_id_prefix: str,
    checkpoint_id: int,
    abort_lingering: Callable[[Any, str, Mapping[str, PreparedRef]], list[str]],
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    also_owned: Sequence[str] = (),
) -> RestoreReport:
    """Settle the pipeline's earlier checkpoints; see the module docstring for the rules.

    ``abort_lingering(admin, prefix, prepared)`` is the abort strategy (LISTING or PROBING
    from ``kafka/checkpoints/abort_strategies.py``): it aborts the open transactions owned by the prefix,
    except the ones of the PREPARED index it is given, and returns the aborted ids.
    ``also_owned``: this checkpoint's ids outside the prefix's generated ones (the offsets
    transaction of a Kafka-input checkpoint, whose checkpoint holds the input claim, so no other
    live attempt can be using it), settled by rule 5.

    ``manifests`` is the pipeline's listing as the caller read it from ``store``
    (``store.manifests(pipeline_id)``): a checkpoint write lists its pipeline once and hands that
    listing to every rule that needs it (naming switch, backfill ceiling, this). What restore itself
    changes (a manifest it commits or marks ABORTED) it reads back by its uri, one read each, so
    the rules after the settling see the settled state. The caller holds the pipeline's writer
    lease (``writer_lease.py``) from before the listing: no other writer of the pipeline has open
    transactions that its vote does not list yet, so rule 4 only meets what dead attempts left.
    """
    report = RestoreReport(checkpoint_id=checkpoint_id, access=store.access)
    for uri, manifest in manifests:
        if manifest.transactional_id_prefix != transactional_id_prefix:
            log.warning("%s was written with transactional id prefix %r, this run uses %r; it is settled all "
                        "the same", uri, manifest.transactional_id_prefix, transactional_id_prefix)
        if manifest.checkpoint_id == checkpoint_id:
            _settle_this_checkpoint(admin, uri, manifest, report, now_ms)
        elif manifest.status is ManifestStatus.PREPARED:
            _recommit(admin, uri, manifest, report, now_ms)

    # The settled state: what restore changed, read back (never abort what a PREPARED manifest lists;
    # this checkpoint's own PREPARED manifest, kept as ``existing``, is among them).
    manifests = _settled(manifests, report)
    protected = prepared_index([(u, m) for u, m in manifests if m.status is ManifestStatus.PREPARED])
    report.protected_transactions = sorted(protected)

    aborted = list(abort_lingering(admin, transactional_id_prefix, protected))
    if also_owned:
        aborted += _abort_own_ids(admin, also_owned, protected, manifests)
    report.aborted_transactions = sorted(aborted)
    if report.aborted_transactions:
        log.warning("aborted %d open transaction(s) of prefix %r left by earlier attempts: %s",
                    len(report.aborted_transactions), transactional_id_prefix,
                    ", ".join(report.aborted_transactions))
    log.info(report.summary())
    if report.existing is None and store.uri(pipeline_id, checkpoint_id) in report.marked_aborted:
        log.warning("checkpoint %d will be produced again: its previous manifest was aborted", checkpoint_id)
    return report


def settle_before_planning(
    admin: RestoreAdmin,
    store: ManifestStore,
    manifests: Sequence[tuple[str, Manifest]],
    *,
    pipeline_id: str,
    transactional_id_prefix: str,
    checkpoint_id: int,
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
) -> list[tuple[str, Manifest]]:
    """Restore's rules 1-3 before a checkpoint chooses what to read: the pipeline's earlier
    PREPARED checkpoints committed when their transactions can be committed, marked ABORTED when
    the coordinator says they are gone (their input range is then read again). Returns the settled
    listing: ``manifests`` (the planner's one listing) with what it changed read back by uri.

    Why: the Kafka-input pipeline plans its range from the last checkpoint that COMMITTED, so an
    older PREPARED one must be settled first; settling it with the writer's own restore (this
    calls :func:`restore_pipeline`) keeps one rule for both pipelines. No open transaction is
    fenced here (rules 4 and 5): the writer's restore does that after the plan, as for every
    checkpoint. What restore cannot decide raises, as it does for the writer.
    """
    report = restore_pipeline(admin, store=store, manifests=manifests,
                              pipeline_id=pipeline_id, transactional_id_prefix=transactional_id_prefix,
                              checkpoint_id=checkpoint_id,
                              abort_lingering=_fence_nothing, now_ms=now_ms)
    return _settled(manifests, report)


def _settled(manifests: Sequence[tuple[str, Manifest]], report: RestoreReport) -> list[tuple[str, Manifest]]:
    """The listing after restore's own transitions: each manifest it committed or marked ABORTED is
    read back by its uri (its status, and the producer pairs a commit recorded); the rest as listed."""
    changed = {*report.recommitted, *report.marked_aborted}
    return [(uri, read_manifest(uri, access=report.access) if uri in changed else manifest)
            for uri, manifest in manifests]


def _fence_nothing(admin: RestoreAdmin, prefix: str, prepared: Mapping[str, PreparedRef]) -> list[str]:
    return []


def _abort_own_ids(admin: RestoreAdmin, ids: Sequence[str], protected: Mapping[str, PreparedRef],
                   manifests: Iterable[tuple[str, Manifest]]) -> list[str]:
    """Fence the open transactions of ``ids`` that a dead attempt left (rule 5 of the module docstring).

    The decision is ``plan_abort``'s (the one abort rule: only Ongoing, never an id a PREPARED
    manifest lists), with ``ids`` as the owned ones. An open transaction whose producer id and
    epoch a COMMITTED manifest lists is refused too: that manifest says it was committed, so it is
    left for a human (``kafka-eos-txn checkpoints``), never aborted.
    """
    ids = list(dict.fromkeys(i for i in ids if i))
    descriptions = admin.describe(ids, missing_ok=True)  # an id never used has nothing to abort
    committed = {(c.transactional_id, c.producer_id, c.producer_epoch): uri for uri, m in manifests
                 if m.status is ManifestStatus.COMMITTED for c in m.committables}
    candidates = []
    for tid, description in descriptions.items():
        uri = committed.get((tid, description.producer_id, description.producer_epoch))
        if uri is not None:
            log.error("%s is open under producer id %d epoch %d, which COMMITTED manifest %s lists: not "
                      "aborted (check that checkpoint with kafka-eos-txn checkpoints)", tid,
                      description.producer_id, description.producer_epoch, uri)
            continue
        candidates.append(AbortCandidate.of(description))
    plan = plan_abort(candidates, prepared=protected,
                      policy=AbortPolicy(prefixes=(), owned_ids=frozenset(ids)))
    for verdict in plan.refused:
        log.info("restore leaves %s alone: %s", verdict.transactional_id, verdict.reason)
    if not plan.to_abort:
        return []
    return [o.transactional_id for o in admin.abort(plan.to_abort) if o.outcome == "aborted"]


def _settle_this_checkpoint(admin: RestoreAdmin, uri: str, manifest: Manifest, report: RestoreReport,
                            now_ms: Callable[[], int]) -> None:
    """This checkpoint's own manifest: keep it (nothing produced again), or mark it ABORTED and
    produce again, only on the verdict's proof that none of its records can be visible."""
    if manifest.status is ManifestStatus.COMMITTED:
        report.existing, report.existing_uri = manifest, uri
        return
    if manifest.status is ManifestStatus.ABORTED:
        log.warning("%s is ABORTED: checkpoint %d is produced again", uri, manifest.checkpoint_id)
        return
    if manifest.decision is not None and manifest.decision.outcome == "abort":
        # Given up, but the give-up stopped before marking it: finish it (its transactions are no
        # longer protected, so the lingering abort below fences them) and produce it again.
        _mark_aborted(uri, manifest, [f"given up by {manifest.decision.by}"], report, now_ms)
        return
    # A recorded decision to commit: its EndTxn may have gone through already (even rotating the
    # producer id), so the coordinator may be asked with the recorded pair.
    decided = manifest.decision is not None and manifest.decision.outcome == "commit"
    verdicts = admin.judge(manifest.committables, ask_coordinator=decided, **effects_kw(manifest))
    outcome = checkpoint_verdict(verdicts)
    if outcome is Verdict.COMMITTED:
        _recommit(admin, uri, manifest, report, now_ms)  # mark it, with the pairs the coordinator holds now
        report.existing, report.existing_uri = read_manifest(uri, access=report.access), uri
        return
    if outcome is Verdict.OPEN and not any(v.error for v in verdicts.values()):
        report.existing, report.existing_uri = manifest, uri  # the commit task commits it
        return
    part_visible = any(v.verdict is Verdict.COMMITTED for v in verdicts.values())
    if outcome is Verdict.OPEN and (decided or part_visible):
        # A commit was decided, or part of the batch is visible already: finish it, never give it up
        # (producing it again would duplicate what is visible).
        _recommit(admin, uri, manifest, report, now_ms)
        report.existing, report.existing_uri = read_manifest(uri, access=report.access), uri
        return
    _refuse_unproven(uri, manifest, verdicts, outcome)
    reasons = [str(v.error) for v in verdicts.values() if v.error is not None]
    _mark_aborted(uri, manifest, reasons, report, now_ms)


def _refuse_unproven(uri: str, manifest: Manifest, verdicts: Mapping[str, TxnVerdict],
                     outcome: Verdict | str) -> None:
    """Raise unless the verdict proves that nothing of the checkpoint is visible (ABORTED), or that
    it is still open without a decision and unsafe to commit (it is then given up and produced again)."""
    if outcome == "torn":
        committed = [t for t, v in verdicts.items() if v.verdict is Verdict.COMMITTED]
        lost = [v for v in verdicts.values() if v.verdict is Verdict.ABORTED]
        raise DataLossError(
            f"checkpoint {manifest.checkpoint_id} ({uri}) is partly committed ({', '.join(committed)}) and "
            f"partly lost ({'; '.join(str(v.error) for v in lost)}); it cannot be produced again without "
            "duplicates",
            transactional_id=lost[0].transactional_id,
            runbook="rerun-a-checkpoint",
        )
    if outcome is Verdict.UNKNOWN:
        unknown = next(v for v in verdicts.values() if v.verdict is Verdict.UNKNOWN)
        why = unknown.error.cause if unknown.error else unknown.evidence
        raise VerdictUnknownError(
            f"checkpoint {manifest.checkpoint_id} ({uri}) is neither committed nor given up, and what became "
            f"of its transaction cannot be established ({why}); it is left PREPARED and nothing is "
            "produced again",
            transactional_id=unknown.transactional_id,
        )


def _recommit(admin: RestoreAdmin, uri: str, manifest: Manifest, report: RestoreReport,
              now_ms: Callable[[], int]) -> None:
    """Commit a PREPARED manifest (its vote stands). Marked ABORTED only when the commit proved that
    none of it can be visible (every transaction aborted); partly committed or unknown: raised."""
    try:
        committed = commit_checkpoint(admin, uri, committed_by="restore", now_ms=now_ms, access=report.access)
    except DataLossError as exc:
        verdicts = admin.judge(manifest.committables, ask_coordinator=True, **effects_kw(manifest))
        outcome = checkpoint_verdict(verdicts)
        if outcome is not Verdict.ABORTED:
            _refuse_unproven(uri, manifest, verdicts, outcome)
            raise
        _mark_aborted(uri, manifest, [str(exc)], report, now_ms)
        return
    report.recommitted.append(uri)
    if committed.status == "already_committed":
        log.info("checkpoint %d (%s) was committed but not marked; marked COMMITTED",
                 manifest.checkpoint_id, uri)
    else:
        log.warning("restore committed checkpoint %d (%s): its commit task had not finished",
                    manifest.checkpoint_id, uri)


def _mark_aborted(uri: str, manifest: Manifest, problems: list[str], report: RestoreReport,
                  now_ms: Callable[[], int]) -> None:
    mark_aborted(uri, problems, aborted_by="restore", now_ms=now_ms, access=report.access)
    report.marked_aborted.append(uri)
    log.error(
        "DATA LOSS: checkpoint %d of pipeline %s (%s) was prepared but can no longer be committed: %s. "
        "The manifest is now ABORTED; rerun that checkpoint to produce it again. Next step: %s",
        manifest.checkpoint_id, manifest.pipeline_id, uri, "; ".join(problems),
        runbook_reference("rerun-a-checkpoint"),
    )
