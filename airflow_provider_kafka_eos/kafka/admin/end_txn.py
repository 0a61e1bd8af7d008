"""Sending EndTxn: the one owner of the rule for ending a prepared transaction by its producer
id / epoch ("commit by resume", and abort in place).

A share of one coordinator's group is sent on one lane and re-sent while the coordinator
answers retriably (NOT_COORDINATOR: look the coordinator up again; no answer: ask again);
when the retry deadline passes the outcome is unknown and the message says to run the
commit/abort again (EndTxn is idempotent). A non-retriable answer is explained by describing
the transaction, to tell data loss from fencing. The admin
(:class:`~airflow_provider_kafka_eos.kafka.admin.transactions.TransactionAdmin`) groups the
committables per coordinator and spreads them over lanes; the functions here take the admin
(its wire, describe, verify_committable, retry timeout) as a parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from kafka.protocol.producer.transaction import EndTxnRequest

from airflow_provider_kafka_eos.kafka.errors import (
    BrokerUnreachableError,
    KafkaEosError,
    ProducerFencedError,
    UnsupportedCapabilityError,
)
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable
from airflow_provider_kafka_eos.kafka.protocol.coordinator_answers import (
    RETRIABLE,
    Retry,
    authorization_error,
)
from airflow_provider_kafka_eos.kafka.protocol.error_codes import (
    INVALID_PRODUCER_EPOCH,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_TXN_STATE,
    NONE,
    NOT_COORDINATOR,
    PRODUCER_FENCED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    error_name,
)
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import (
    TransactionDescription,
    TxnOutcome,
    holder_text,
)
from airflow_provider_kafka_eos.kafka.protocol.verdicts import TxnVerdict, Verdict
from airflow_provider_kafka_eos.kafka.protocol.wire import Wire

__all__ = ["EndTxnAdmin", "check_end_txn_versions", "end_txn_error", "end_txn_group"]


class EndTxnAdmin(Protocol):
    """What EndTxn needs of the admin handed in (a TransactionAdmin): its wire and retry budget,
    describe, and the commit rule with its clock. A Protocol, so this module does not import the
    facade that imports it."""

    wire: Wire
    retry_timeout_ms: int

    def describe(
        self, ids: Sequence[str], *, missing_ok: bool = False
    ) -> dict[str, TransactionDescription]: ...

    def verify_committable(self, committable: Committable, description: TransactionDescription) -> str: ...

    def judge(
        self, committables: Sequence[Committable], *, ask_coordinator: bool,
        descriptions: dict[str, TransactionDescription] | None = None,
    ) -> dict[str, TxnVerdict]: ...


def check_end_txn_versions(wire: Wire, committables: Sequence[Committable]) -> None:
    """Refuse, before anything is sent, a committable whose EndTxn version the cluster lacks."""
    supported = wire.broker_api_range(EndTxnRequest.API_KEY)
    for c in committables:
        if supported is None or not supported[0] <= c.end_txn_version <= min(
            supported[1], EndTxnRequest.max_version
        ):
            raise UnsupportedCapabilityError(
                f"the committable needs EndTxn v{c.end_txn_version} (transaction version "
                f"{c.transaction_version}) but the cluster supports {supported or 'no EndTxn'}; was it "
                "prepared on another cluster, or was the cluster downgraded?",
                transactional_id=c.transactional_id,
            )


def _end_txn_requests(
    wire: Wire, pending: Sequence[Committable], commit: bool
) -> list[tuple[EndTxnRequest, int | None]]:
    """One EndTxn per committable, addressed to its coordinator when the lookup answered."""
    try:
        coordinators = wire.coordinators(c.transactional_id for c in pending)
    except BrokerUnreachableError:
        # No lookup answered (the cluster, or this lane's connection, is down). Send anyway,
        # to any broker: an EndTxn without an answer is retried until the deadline and then
        # reported as "outcome unknown"; a broker that is not the coordinator says so.
        coordinators = {}
    batch = []
    for c in pending:
        request = EndTxnRequest(
            transactional_id=c.transactional_id,
            producer_id=c.producer_id,
            producer_epoch=c.producer_epoch,
            committed=commit,
            version=c.end_txn_version,
        )
        node = coordinators.get(c.transactional_id)
        batch.append((request, node if isinstance(node, int) else None))
    return batch


def end_txn_group(
    admin: EndTxnAdmin,
    group: Sequence[Committable],
    commit: bool,
    *,
    new_retry: Callable[[], Retry],
    wire: Wire | None = None,
    on_answer: Callable[[str], None] | None = None,
) -> tuple[list[TxnOutcome], list[KafkaEosError]]:
    """EndTxn for one share of a coordinator's group, on one lane (``wire``, the admin's own by
    default), until each answers or the retry deadline passes ("outcome unknown: run again").

    ``new_retry`` makes the deadline/backoff for this group (the admin's retry timeout and
    call deadline); a non-retriable answer is explained by :func:`end_txn_error`.
    ``on_answer(transactional_id)`` is called once per id as soon as its outcome is final
    (committed, aborted or failed), so a caller can show live progress of a large batch.
    """
    answered = on_answer or (lambda _tid: None)
    wire = wire or admin.wire
    pending = list(group)
    done: list[TxnOutcome] = []
    failed: list[KafkaEosError] = []
    retry = new_retry()
    verb = "commit" if commit else "abort"
    last: dict[str, str] = {}  # the last answer per id, for the "outcome unknown" message
    while pending:
        again: list[Committable] = []
        progressed = False
        answers = wire.send_all(_end_txn_requests(wire, pending, commit), raise_errors=False)
        for c, response in zip(pending, answers, strict=True):
            if isinstance(response, BrokerUnreachableError):
                wire.forget_coordinator(c.transactional_id)  # it may have moved: ask again
                last[c.transactional_id] = f"no answer ({response.cause})"
                again.append(c)
                continue
            code = response.error_code
            last[c.transactional_id] = error_name(code)
            if code == NONE:
                done.append(
                    TxnOutcome(
                        c.transactional_id,
                        "committed" if commit else "aborted",
                        getattr(response, "producer_id", c.producer_id),
                        _response_epoch(response, c),
                    )
                )
                answered(c.transactional_id)
                progressed = True
            elif code in RETRIABLE:
                if code == NOT_COORDINATOR:
                    wire.forget_coordinator(c.transactional_id)
                again.append(c)
            else:
                explained = end_txn_error(admin, c, code, verb)
                if isinstance(explained, TxnOutcome):  # refused, yet the verdict proves it committed
                    done.append(explained)
                else:
                    failed.append(explained)
                answered(c.transactional_id)
        pending = again
        if progressed:  # the budget bounds retriable answers, not how long a big wave takes to send
            retry = new_retry()
        if pending and not retry.wait():
            for c in pending:
                failed.append(
                    BrokerUnreachableError(
                        f"EndTxn({verb}) did not complete within {admin.retry_timeout_ms} ms (the "
                        "coordinator kept answering retriable errors or did not answer; the last answer "
                        f"was {last.get(c.transactional_id, 'none')}); its outcome is "
                        f"unknown: run the {verb} again (it is idempotent) before the transaction "
                        "times out",
                        transactional_id=c.transactional_id,
                    )
                )
                answered(c.transactional_id)
            break
    return done, failed


def end_txn_error(admin: EndTxnAdmin, c: Committable, code: int, verb: str) -> KafkaEosError | TxnOutcome:
    """Explain a non-retriable EndTxn answer; the answer code alone proves nothing (under TV2 a
    commit racing the timeout-abort and a pair another producer took both get PRODUCER_FENCED).

    For a commit the verdict decides (``admin.judge``: the coordinator's description and the
    partitions' data; the EndTxn just answered was the coordinator's question): committed after
    all -> the ``already_committed`` outcome; aborted -> the named data loss; unknown -> the
    refusal naming what is missing. For an abort: fenced or refused, with what the coordinator holds.
    """
    tid = c.transactional_id
    if code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return authorization_error(tid, "WRITE", f"EndTxn({verb})")
    if verb == "commit":
        try:
            verdict = admin.judge([c], ask_coordinator=False)[tid]
        except KafkaEosError as exc:
            return KafkaEosError(
                f"EndTxn(commit) was refused with {error_name(code)} and the verdict could not be read "
                f"({exc.cause}); nothing else was changed: run the commit again",
                transactional_id=tid, runbook="verdict-unknown",
            )
        if verdict.verdict is Verdict.COMMITTED:
            pid = verdict.producer_id if verdict.producer_id is not None else c.producer_id
            epoch = verdict.producer_epoch if verdict.producer_epoch is not None else c.producer_epoch
            return TxnOutcome(tid, "already_committed", pid, epoch)
        if verdict.error is not None and verdict.verdict is not Verdict.OPEN:
            return verdict.error
        return ProducerFencedError(
            f"EndTxn(commit) with producer id {c.producer_id}, epoch {c.producer_epoch} was refused with "
            f"{error_name(code)} while the coordinator shows it open ({verdict.evidence}); nothing was "
            "committed: run the commit again",
            transactional_id=tid,
        )
    try:
        described = admin.describe([tid], missing_ok=True).get(tid)
    except KafkaEosError:
        described = None
    if code in (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING, INVALID_TXN_STATE):
        return ProducerFencedError(
            f"EndTxn({verb}) with producer id {c.producer_id}, epoch {c.producer_epoch} was refused with "
            f"{error_name(code)}: the coordinator holds "
            f"{holder_text(described)}",
            transactional_id=tid,
        )
    return KafkaEosError(
        f"EndTxn({verb}) failed with {error_name(code)}", transactional_id=tid, runbook="troubleshooting"
    )


def _response_epoch(response: Any, c: Committable) -> int:
    epoch = getattr(response, "producer_epoch", -1)
    return epoch if isinstance(epoch, int) and epoch >= 0 else c.producer_epoch
