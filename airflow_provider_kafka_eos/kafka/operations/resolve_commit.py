"""The commit actions of a resolution request: commit one transaction, commit by manifest.

A commit needs the producer id and epoch (from the manifest, or from ``describe``); a dry run
asks the coordinator the same questions the commit would (:func:`dry_run_outcome`). Committing a
manifest is ``kafka/checkpoints/lifecycle.py``'s :func:`commit_checkpoint`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import StoreAccess
from airflow_provider_kafka_eos.kafka.operations.resolution_request import (
    Progress,
    ResolutionRequest,
    ResolutionResult,
)
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import wall_clock_ms
from airflow_provider_kafka_eos.kafka.protocol.verdicts import Verdict

if TYPE_CHECKING:  # an action may use any of the facade's operations: its type is the facade
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin


def capabilities_of(admin: TransactionAdmin) -> Any:
    """The cluster's capabilities through the admin's own connection (no second connection)."""
    from airflow_provider_kafka_eos.kafka.admin.capabilities import ClusterCapabilities

    return ClusterCapabilities.probe_with(admin.wire)


def committable_for(admin: TransactionAdmin, transactional_id: str, producer_id: int, epoch: int) -> Any:
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
    known = desc.start_time_ms is not None and desc.start_time_ms >= 0
    start = desc.start_time_ms if known else wall_clock_ms()
    tv = 2 if admin.transaction_version() >= 2 else 1
    return Committable(
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=epoch,
        partitions=partitions,
        record_count=None,  # a hand-typed commit: nobody counted the records
        prepared_at_ms=wall_clock_ms(),
        transaction_start_ms=start,
        transaction_timeout_ms=desc.timeout_ms if desc.timeout_ms and desc.timeout_ms > 0 else 1,
        transaction_version=tv,
        end_txn_version=admin.end_txn_version(),
    )


def action_commit(
    admin: TransactionAdmin, request: ResolutionRequest, progress: Progress | None
) -> ResolutionResult:
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


def dry_run_outcome(admin: TransactionAdmin, committable: Any) -> str:
    """What a commit of ``committable`` would do: raises what the commit would raise.

    It asks what the commit asks, EndTxn(commit) with the recorded pair included (the verdict sends
    it only when the coordinator no longer holds that pair open, so it cannot commit anything: the
    coordinator answers from its own history), so a dry run fails exactly as the commit would.
    """
    verdict = admin.judge([committable], ask_coordinator=True)[committable.transactional_id]
    if verdict.error is not None:
        raise verdict.error
    return "already committed" if verdict.verdict is Verdict.COMMITTED else "would commit"


def action_commit_from_manifest(
    admin: TransactionAdmin, request: ResolutionRequest, progress: Progress | None, access: StoreAccess
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
