"""Abort by fencing: InitProducerId for a transactional id bumps its epoch, and the coordinator
aborts the open transaction (answering CONCURRENT_TRANSACTIONS until it has).

:func:`fence_many` pipelines InitProducerId for many ids on one lane, in waves, until each
answers; with ``enable_2pc`` it sends v6 (KIP-939's Enable2Pc), which :func:`init_v6` checks
the cluster offers. The admin
(:class:`~airflow_provider_kafka_eos.kafka.admin.transactions.TransactionAdmin`) describes first
(InitProducerId on an unknown id would create it), groups per coordinator and spreads over
lanes; the functions here take the admin (its wire and retry timeout) as a parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from kafka.protocol.producer.transaction import InitProducerIdRequest

from airflow_provider_kafka_eos.kafka.errors import (
    AuthorizationError,
    BrokerUnreachableError,
    KafkaEosError,
    UnsupportedCapabilityError,
)
from airflow_provider_kafka_eos.kafka.protocol.coordinator_answers import (
    RETRIABLE,
    Retry,
    error_for_code,
)
from airflow_provider_kafka_eos.kafka.protocol.error_codes import (
    CONCURRENT_TRANSACTIONS,
    INVALID_TRANSACTION_TIMEOUT,
    NONE,
    NOT_COORDINATOR,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    error_name,
)
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import TransactionDescription, TxnOutcome
from airflow_provider_kafka_eos.kafka.protocol.wire import Wire

__all__ = ["FencingAdmin", "fence_many", "fence_outcome", "init_v6"]


class FencingAdmin(Protocol):
    """What fencing needs of the admin handed in (a TransactionAdmin): its wire and retry budget.
    A Protocol, so this module does not import the facade that imports it."""

    wire: Wire
    retry_timeout_ms: int


def _init_requests(
    wire: Wire, pending: Sequence[str], timeouts: dict[str, int], two_pc: dict[str, Any]
) -> tuple[list[tuple[Any, Any]], list[str], list[str], dict[str, KafkaEosError]]:
    """One InitProducerId per id, addressed to its coordinator: ``(requests, their ids, ids to
    ask again, ids whose coordinator lookup was refused)``."""
    try:
        coordinators = wire.coordinators(pending)
    except BrokerUnreachableError:
        # No lookup answered (the cluster, or this lane's connection, is down): send anyway,
        # to any broker, as EndTxn does; no answer is retried until the deadline and then
        # reported per id, and a broker that is not the coordinator says so.
        coordinators = {}
    batch, sent, again = [], [], []
    refused: dict[str, KafkaEosError] = {}
    for tid in pending:
        node = coordinators.get(tid)
        if isinstance(node, Exception):
            code = getattr(node, "errno", -1)
            if code in RETRIABLE:
                wire.forget_coordinator(tid)
                again.append(tid)
            else:
                refused[tid] = error_for_code(tid, code, "FindCoordinator")
            continue
        request = InitProducerIdRequest(
            transactional_id=tid,
            transaction_timeout_ms=timeouts[tid],
            producer_id=-1,
            producer_epoch=-1,
            **two_pc,
        )
        batch.append((request, node))
        sent.append(tid)
    return batch, sent, again, refused


def fence_many(
    admin: FencingAdmin,
    targets: Sequence[tuple[str, int]],
    *,
    new_retry: Callable[[], Retry],
    enable_2pc: bool = False,
    wire: Wire | None = None,
    on_answer: Callable[[str], None] | None = None,
) -> tuple[dict[str, tuple[int, int, bool]], dict[str, KafkaEosError]]:
    """InitProducerId for many ids, pipelined in waves until each answers NONE.

    Returns ``{id: (producer id, epoch, aborted_open_transaction)}`` and ``{id: error}``.
    CONCURRENT_TRANSACTIONS on the first answer means the coordinator found an open
    transaction and is aborting it (the epoch fence); the wave is re-sent after a backoff.
    ``wire`` is the lane to send on (the admin's own by default); ``new_retry`` makes the
    deadline/backoff of the waves (the admin's retry timeout and call deadline).
    ``on_answer(transactional_id)`` is called once per id as soon as its outcome is final (fenced
    or failed), so a caller can show live progress of a large abort.
    """
    answered = on_answer or (lambda _tid: None)
    wire = wire or admin.wire
    timeouts = {t: (ms if ms and ms > 0 else 60000) for t, ms in targets}
    two_pc: dict[str, Any] = {}
    if enable_2pc:
        two_pc = {"enable2_pc": True, "keep_prepared_txn": False, "version": init_v6(admin.wire, targets)}
    pending = list(timeouts)
    fenced: set[str] = set()
    last_code: dict[str, int] = {}
    done: dict[str, tuple[int, int, bool]] = {}
    failed: dict[str, KafkaEosError] = {}
    retry = new_retry()
    while pending:
        batch, sent, again, refused = _init_requests(wire, pending, timeouts, two_pc)
        for tid, error in refused.items():
            failed[tid] = error
            answered(tid)
        progressed = False
        for tid, response in zip(sent, wire.send_all(batch, raise_errors=False), strict=True):
            if isinstance(response, BrokerUnreachableError):
                wire.forget_coordinator(tid)  # it may have moved: ask again
                again.append(tid)
                continue
            code = last_code[tid] = response.error_code
            if code == NONE:
                done[tid] = (response.producer_id, response.producer_epoch, tid in fenced)
                answered(tid)
                progressed = True
            elif code == CONCURRENT_TRANSACTIONS:
                progressed |= tid not in fenced  # first answer: the abort has started
                fenced.add(tid)  # the coordinator is aborting the open transaction for us
                again.append(tid)
            elif code in RETRIABLE:
                if code == NOT_COORDINATOR:
                    wire.forget_coordinator(tid)
                again.append(tid)
            else:
                failed[tid] = _refusal(tid, code, timeouts[tid], enable_2pc=enable_2pc)
                answered(tid)
        pending = again
        if progressed:
            # The retry budget bounds retriable answers, not the time a big wave takes to send:
            # 1,666 ids on one lane take longer than the budget to answer once, and every id
            # needs two answers (the fence starts the abort, the next one sees it done).
            # The admin's call deadline still bounds the whole call (new_retry includes it).
            retry = new_retry()
        if pending and not retry.wait():
            for tid in pending:
                failed[tid] = _out_of_time(tid, last_code.get(tid), admin.retry_timeout_ms)
                answered(tid)
            break
    return done, failed


def _refusal(tid: str, code: int, timeout_ms: int, *, enable_2pc: bool) -> KafkaEosError:
    """The error a non-retriable InitProducerId answer ``code`` for ``tid`` stands for."""
    if code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED and enable_2pc:
        return AuthorizationError(
            "InitProducerId with Enable2Pc was refused with "
            "TRANSACTIONAL_ID_AUTHORIZATION_FAILED: the broker needs "
            "transaction.two.phase.commit.enable=true and the principal "
            "TWO_PHASE_COMMIT (besides WRITE) on the TransactionalId",
            transactional_id=tid,
            runbook="two-phase-commit",
        )
    if code == INVALID_TRANSACTION_TIMEOUT:
        return KafkaEosError(
            f"InitProducerId was refused with {error_name(code)} for timeout {timeout_ms} ms "
            "(above transaction.max.timeout.ms?)",
            transactional_id=tid,
            runbook="troubleshooting",
        )
    return error_for_code(tid, code, "InitProducerId")


def _out_of_time(tid: str, last_code: int | None, retry_timeout_ms: int) -> BrokerUnreachableError:
    """A fence still unanswered when the retry deadline passed: its outcome is unknown."""
    answer = error_name(last_code) if last_code is not None else "no answer"
    return BrokerUnreachableError(
        f"InitProducerId (fencing) did not complete within {retry_timeout_ms} ms; "
        f"the last answer was {answer}; whether it was aborted is unknown: run the abort "
        "again (an id whose transaction already ended is left alone)",
        transactional_id=tid,
    )


def init_v6(wire: Wire, targets: Sequence[tuple[str, int]]) -> int:
    """InitProducerId v6 (KIP-939), or the error that says the cluster cannot do 2PC."""
    version = wire.api_version(InitProducerIdRequest)
    if version is None or version < 6:
        raise UnsupportedCapabilityError(
            f"two-phase commit needs InitProducerId v6 (KIP-939); the cluster offers "
            f"{'none' if version is None else f'v{version}'} (Kafka 4.1+ with "
            "transaction.two.phase.commit.enable=true and unstable.api.versions.enable=true)",
            transactional_id=targets[0][0] if targets else None,
            runbook="two-phase-commit",
        )
    return 6


def fence_outcome(d: TransactionDescription, pid: int, epoch: int, fenced: bool) -> TxnOutcome:
    """What fencing did to the transaction ``d`` described: aborted it, or found it already ended."""
    tid = d.transactional_id
    if fenced:
        return TxnOutcome(tid, "aborted", pid, epoch, f"fenced epoch {d.producer_epoch} -> {epoch}")
    return TxnOutcome(
        tid,
        "already_completed",
        pid,
        epoch,
        "the transaction ended before the fence reached it; nothing was aborted",
    )
