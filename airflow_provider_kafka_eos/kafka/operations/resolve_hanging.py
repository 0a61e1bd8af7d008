"""The hanging-transaction actions of a resolution request (KIP-664): find, abort one partition's.

A hanging transaction holds a partition's last stable offset back while its coordinator no longer
knows it; these actions read the partitions' open transactions and, for an abort, refuse a
producer id a PREPARED manifest lists (its batch must commit).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import StoreAccess
from airflow_provider_kafka_eos.kafka.errors import KafkaEosError, UsageError
from airflow_provider_kafka_eos.kafka.operations.resolution_request import (
    DEFAULT_HANGING_MIN_AGE_MS,
    Progress,
    ResolutionRequest,
    ResolutionResult,
)
from airflow_provider_kafka_eos.kafka.operations.resolve_abort import (
    prepared_for,
)
from airflow_provider_kafka_eos.kafka.operations.resolve_read import (
    description_row,
    visibility_warnings,
)

if TYPE_CHECKING:  # an action may use any of the facade's operations: its type is the facade
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin


def action_find_hanging(
    admin: TransactionAdmin, request: ResolutionRequest, progress: Progress | None, access: StoreAccess
) -> ResolutionResult:
    if request.topics:
        return _find_hanging_partitions(admin, request)
    min_age = DEFAULT_HANGING_MIN_AGE_MS if request.min_age_ms is None else request.min_age_ms
    lingering = admin.find_lingering(prefixes=list(request.prefixes) or None, min_age_ms=min_age)
    from airflow_provider_kafka_eos.kafka.checkpoints.store import load_prepared

    prepared = load_prepared(request.manifest_base_uri, access=access) if request.manifest_base_uri else {}
    protected = {tid: ref.manifest_uri for tid, ref in prepared.items()}
    rows = []
    for desc in sorted(lingering, key=lambda d: d.transactional_id):
        row = description_row(desc)
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
        warnings=visibility_warnings(admin, request.prefixes),
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


def _lso_stalls(admin: TransactionAdmin, lingering: Sequence[Any]) -> dict[int, list[str]]:
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


def _partitions_of(admin: TransactionAdmin, request: ResolutionRequest) -> list[tuple[str, int]]:
    """``--topic`` (every partition of it, from metadata) or ``--topic`` with ``--partition``."""
    from airflow_provider_kafka_eos.kafka.admin.hanging import topic_partitions

    if request.partition is not None:
        return [(t, request.partition) for t in request.topics]
    return topic_partitions(admin, request.topics)


def _find_hanging_partitions(admin: TransactionAdmin, request: ResolutionRequest) -> ResolutionResult:
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


def action_abort_partition(
    admin: TransactionAdmin, request: ResolutionRequest, progress: Progress | None, access: StoreAccess
) -> ResolutionResult:
    """KIP-664 admin abort of one partition's open transaction (WriteTxnMarkers, no JVM tool).

    The manifest store is read first, as for every abort: a producer id a PREPARED manifest lists
    is refused (its batch must commit). Then the partition's open transactions are read; the
    target must be one of them, and one its coordinator no longer owns (else ``abort
    --transactional-id`` is the way, and ``--force`` the explicit way around).
    """
    from airflow_provider_kafka_eos.kafka.admin.hanging import abort_on_partition, open_transactions

    prepared = prepared_for(request, access)
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
