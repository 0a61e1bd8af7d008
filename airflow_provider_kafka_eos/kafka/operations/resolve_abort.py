"""The abort actions of a resolution request: abort by id or prefix, abort by manifest.

Every abort reads the manifest store first (:func:`prepared_for`) and refuses the transactions a
PREPARED manifest lists, unless the request says ``protect=False``: aborting those would lose
a batch that must commit (invariant 4). The decision is ``kafka/checkpoints/abort_plan.py``'s;
this module maps the request onto it and the admin's aborts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import StoreAccess
from airflow_provider_kafka_eos.kafka.errors import KafkaEosError
from airflow_provider_kafka_eos.kafka.operations.resolution_request import (
    Progress,
    ResolutionRequest,
    ResolutionResult,
)
from airflow_provider_kafka_eos.kafka.operations.resolve_commit import committable_for
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import wall_clock_ms

if TYPE_CHECKING:  # an action may use any of the facade's operations: its type is the facade
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin


def prepared_for(request: ResolutionRequest, access: StoreAccess) -> dict[str, Any]:
    """The PREPARED index this abort must respect (``ManifestStoreError`` if the store is unusable)."""
    from airflow_provider_kafka_eos.kafka.checkpoints.store import load_prepared

    return load_prepared(
        request.manifest_base_uri, protect=request.protect, source="--manifest-base / manifest_base_uri",
        access=access,
    )


def writing_for(request: ResolutionRequest, access: StoreAccess) -> dict[str, str]:
    """The prefixes whose pipeline's writer holds its lease: this abort leaves them alone."""
    from airflow_provider_kafka_eos.kafka.checkpoints.writer_lease import load_writing

    return load_writing(request.manifest_base_uri, protect=request.protect,
                        source="--manifest-base / manifest_base_uri", access=access)


def action_abort(
    admin: TransactionAdmin, request: ResolutionRequest, progress: Progress | None, access: StoreAccess
) -> ResolutionResult:
    """Abort one id (optionally compare-and-abort) or every Ongoing one under prefixes.

    The store is read before Kafka is asked anything, so an unusable store changes nothing.
    """
    from airflow_provider_kafka_eos.kafka.checkpoints.abort_plan import (
        AbortCandidate,
        AbortPolicy,
        plan_abort,
    )
    from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import DEFAULT_TRANSACTION_TIMEOUT_MS

    prepared = prepared_for(request, access)
    writing = writing_for(request, access)
    if request.transactional_id:
        return _abort_one(admin, request, prepared, writing)
    min_age = DEFAULT_TRANSACTION_TIMEOUT_MS if request.min_age_ms is None else request.min_age_ms
    lingering = admin.find_lingering(prefixes=list(request.prefixes), min_age_ms=0)
    now = wall_clock_ms()
    plan = plan_abort(
        (AbortCandidate.of(d, now) for d in sorted(lingering, key=lambda d: d.transactional_id)),
        prepared=prepared,
        policy=AbortPolicy(protect=request.protect, prefixes=request.prefixes, min_age_ms=min_age,
                           writing=writing),
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


def _abort_one(
    admin: TransactionAdmin, request: ResolutionRequest, prepared: dict[str, Any], writing: dict[str, str]
) -> ResolutionResult:
    """One id: every check the real abort makes, also in a dry run; a refusal is an error."""
    from airflow_provider_kafka_eos.kafka.checkpoints.abort_plan import (
        AbortCandidate,
        AbortPolicy,
        plan_abort,
    )

    txn_id = request.transactional_id
    assert txn_id is not None
    compare = request.producer_id is not None and request.epoch is not None
    desc = admin.describe([txn_id])[txn_id]  # UnknownTransactionError for an unknown id
    expected = {txn_id: (request.producer_id, request.epoch)} if compare else {}
    (verdict,) = plan_abort(
        [AbortCandidate.of(desc)],
        prepared=prepared,
        policy=AbortPolicy(protect=request.protect, expected=expected, writing=writing),
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


def action_abort_checkpoint(
    admin: TransactionAdmin, request: ResolutionRequest, progress: Progress | None, access: StoreAccess
) -> ResolutionResult:
    """``kafka-eos-txn abort --manifest URI``: abort what the checkpoint holds open, mark it ABORTED."""
    from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import abort_checkpoint

    assert request.manifest_uri is not None
    report = abort_checkpoint(admin, request.manifest_uri, dry_run=request.dry_run, progress=progress,
                              access=access)
    rows = [{"transactional_id": t, "outcome": o} for t, o in sorted(report.outcomes.items())]
    return ResolutionResult(rows, report.summary(), True, ("transactional_id", "outcome"))
