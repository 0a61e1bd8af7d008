"""The verdict: what became of a prepared transaction that this process did not start.

One owner for the question every later reader of a manifest asks (the commit, the rerun's
restore, the give-up, the sensor's classification, the single-transaction CLI commit, the
operators' view): is this transaction COMMITTED, ABORTED, still OPEN, or UNKNOWN? The answer
comes from the coordinator and the data, asked with the producer id / epoch the manifest
recorded, never from one error code (design.md invariant 10):

1. the coordinator's description (:func:`~.commit_rules.verify_committable`): decisive while it
   still holds this transaction's producer id at the epoch only this transaction's own end
   leaves;
2. otherwise the partitions' data (:mod:`~.txn_data`): with the offsets of the transaction's
   first records (recorded in the committable), a ``read_committed`` Fetch per partition says
   committed (stable, not in the aborted index) or aborted (in the index);
3. otherwise, under TV2 and only for a caller that may commit (``ask_coordinator``), EndTxn(commit)
   with the recorded pair: the coordinator recognises a retry of the transaction's own completion
   even across a producer-id rotation at the epoch limit (answering NONE with its current pair for
   a commit, INVALID_TXN_STATE for an abort). It cannot commit anything else: a pair that is not
   the open transaction's is refused (PRODUCER_FENCED / INVALID_PRODUCER_ID_MAPPING);
4. what none of them settles is UNKNOWN: the caller refuses and changes nothing, and the error
   names what is missing.

No Airflow imports: the Spark driver's restore uses it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from kafka.protocol.producer.transaction import EndTxnRequest

from airflow_provider_kafka_eos.kafka.admin.commit_rules import timeout_hint
from airflow_provider_kafka_eos.kafka.admin.input_offsets import group_offsets
from airflow_provider_kafka_eos.kafka.admin.txn_data import (
    PartitionReading,
    data_outcome,
    read_transaction_data,
)
from airflow_provider_kafka_eos.kafka.errors import (
    BrokerUnreachableError,
    DataLossError,
    KafkaEosError,
    ProducerFencedError,
    TransactionTimeoutRiskError,
    VerdictUnknownError,
)
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable
from airflow_provider_kafka_eos.kafka.protocol.coordinator_answers import RETRIABLE, Retry
from airflow_provider_kafka_eos.kafka.protocol.error_codes import (
    INVALID_TXN_STATE,
    NONE,
    NOT_COORDINATOR,
    error_name,
)
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import (
    TransactionDescription,
    TxnState,
    holder_text,
)
from airflow_provider_kafka_eos.kafka.protocol.verdicts import GroupEffect, TxnVerdict, Verdict
from airflow_provider_kafka_eos.kafka.protocol.wire import Wire

__all__ = ["VerdictAdmin", "judge"]


class VerdictAdmin(Protocol):
    """What a verdict needs of the admin (a TransactionAdmin): a Protocol, so this module does not
    import the facade that imports it."""

    wire: Wire

    def describe(
        self, ids: Sequence[str], *, missing_ok: bool = False
    ) -> dict[str, TransactionDescription]: ...

    def verify_committable(self, committable: Committable, description: TransactionDescription) -> str: ...

    def new_retry(self) -> Retry: ...

    def now_ms(self) -> int: ...


def judge(
    admin: VerdictAdmin,
    committables: Sequence[Committable],
    *,
    ask_coordinator: bool,
    descriptions: Mapping[str, TransactionDescription] | None = None,
    group_effects: Mapping[str, GroupEffect] | None = None,
) -> dict[str, TxnVerdict]:
    """The verdict of every committable (see the module docstring for the order of evidence).

    ``ask_coordinator``: whether EndTxn(commit) with the recorded pair may be sent as the question
    of step 3; only callers that may commit the transaction pass True (the commit and restore of
    a checkpoint whose vote is commit). ``descriptions``: what the caller already described.
    ``group_effects``: transactional id -> what it does to a consumer group when committed (a
    Kafka-input checkpoint's offsets transaction, whose data is the group's committed offsets).
    """
    committables = list(committables)
    if not committables:
        return {}
    if descriptions is None:
        descriptions = admin.describe([c.transactional_id for c in committables], missing_ok=True)
    verdicts: dict[str, TxnVerdict] = {}
    for c in committables:
        d = descriptions.get(c.transactional_id)
        verdict = _from_description(admin, c, d)
        effect = (group_effects or {}).get(c.transactional_id)
        verdicts[c.transactional_id] = verdict or _from_data_and_coordinator(admin, c, d, ask_coordinator,
                                                                             effect)
    return verdicts


def _from_description(
    admin: VerdictAdmin, c: Committable, d: TransactionDescription | None
) -> TxnVerdict | None:
    tid = c.transactional_id
    if d is None:
        return None
    held = {"producer_id": d.producer_id, "producer_epoch": d.producer_epoch}
    try:
        rule = admin.verify_committable(c, d)
    except DataLossError as exc:
        return TxnVerdict(tid, Verdict.ABORTED, f"coordinator: {exc.cause}", error=exc, **held)
    except (TransactionTimeoutRiskError, ProducerFencedError) as exc:
        return TxnVerdict(tid, Verdict.OPEN, f"coordinator: {exc.cause}", error=exc, **held)
    if rule == "already_committed":
        return TxnVerdict(tid, Verdict.COMMITTED, f"coordinator: committed ({holder_text(d)})", **held)
    if rule == "commit" and d.state == TxnState.PREPARE_COMMIT:  # decided: the coordinator completes it
        return TxnVerdict(tid, Verdict.COMMITTED, f"coordinator: commit under way ({holder_text(d)})", **held)
    if rule == "commit":
        return TxnVerdict(tid, Verdict.OPEN, f"coordinator: open ({holder_text(d)})", **held)
    return None  # undecided from the description alone


def _from_data_and_coordinator(
    admin: VerdictAdmin, c: Committable, d: TransactionDescription | None, ask_coordinator: bool,
    effect: GroupEffect | None = None,
) -> TxnVerdict:
    tid = c.transactional_id
    holds = "the coordinator does not know the id" if d is None else f"the coordinator holds {holder_text(d)}"
    readings = read_transaction_data(admin.wire, c)
    outcome = data_outcome(readings)
    data_text = "; ".join(map(str, readings))
    if effect is not None and outcome is None:
        outcome, data_text = _group_outcome(admin, effect)
    if outcome == "committed":
        return TxnVerdict(tid, Verdict.COMMITTED, f"data: {data_text} ({holds})", *_pair(d))
    if outcome == "aborted":
        return _aborted(admin, c, f"the partitions' data shows it aborted ({data_text}); {holds}", d)
    asked = ""
    if ask_coordinator and c.transaction_version >= 2:
        answer = _ask_retry(admin, c)
        if isinstance(answer, tuple):
            pid, epoch = answer
            return TxnVerdict(
                tid, Verdict.COMMITTED,
                f"coordinator: EndTxn(commit) with the recorded producer id {c.producer_id}, epoch "
                f"{c.producer_epoch} was recognised as a retry of its commit (now producer id {pid}, epoch "
                f"{epoch})", pid, epoch,
            )
        aborted_now = d is not None and d.state in (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT)
        if answer == INVALID_TXN_STATE and aborted_now:
            return _aborted(
                admin, c,
                f"{holds}, and EndTxn(commit) with the recorded producer id {c.producer_id}, epoch "
                f"{c.producer_epoch} was answered INVALID_TXN_STATE: the coordinator recognised the pair "
                "as a transaction that ended in an abort", d,
            )
        asked = f"; EndTxn(commit) with the recorded pair was answered {_answer_text(answer)}"
    missing = _what_is_missing(c, readings, outcome)
    return TxnVerdict(
        tid, Verdict.UNKNOWN, f"{holds}{asked}; {missing}", *_pair(d),
        error=VerdictUnknownError(
            f"cannot tell whether the prepared transaction (producer id {c.producer_id}, epoch "
            f"{c.producer_epoch}, {c.records_text}) was committed or aborted: {holds}, which does not say"
            f"{asked}, and {missing}. Nothing was changed; read the partitions' data (a read_committed "
            "consumer from the batch's offsets) before deciding by hand",
            transactional_id=tid,
        ),
    )


def _group_outcome(admin: VerdictAdmin, effect: GroupEffect) -> tuple[str | None, str]:
    """The offsets transaction's data: the group's committed offsets. At every ``to``: committed.
    At every ``from`` (or none yet): not committed, and since the coordinator no longer holds it
    open (the description came first), it can never be: aborted. Anything else: no answer."""
    try:
        found = group_offsets(admin, effect.group, [(t, p) for t, p, _, _ in effect.moves])
    except KafkaEosError as exc:
        return None, f"the group {effect.group!r}'s offsets cannot be read ({exc.cause})"
    at = [found.get((t, p)) for t, p, _, _ in effect.moves]
    where = ", ".join(f"{t}-{p}: {o}" for (t, p, _, _), o in zip(effect.moves, at, strict=True))
    text = f"consumer group {effect.group!r} at ({where})"
    if all(o == to for o, (_, _, _, to) in zip(at, effect.moves, strict=True)):
        return "committed", f"{text}: the checkpoint's ends"
    if all(o is None or o == start for o, (_, _, start, _) in zip(at, effect.moves, strict=True)):
        return "aborted", f"{text}: not moved to the checkpoint's ends"
    return None, f"{text}: neither the checkpoint's starts nor its ends"


def _aborted(admin: VerdictAdmin, c: Committable, how: str, d: TransactionDescription | None) -> TxnVerdict:
    hint = timeout_hint(c, admin.now_ms())
    cause = "its transaction timeout passed and the coordinator aborted it" if hint else "it was aborted"
    error = DataLossError(
        f"the prepared transaction (producer id {c.producer_id}, epoch {c.producer_epoch}, {c.records_text}) "
        f"can no longer be committed: {cause}{hint} ({how})",
        transactional_id=c.transactional_id,
    )
    return TxnVerdict(c.transactional_id, Verdict.ABORTED, how, *_pair(d), error=error)


def _ask_retry(admin: VerdictAdmin, c: Committable) -> tuple[int, int] | int | str:
    """EndTxn(commit) with the recorded pair, retried on retriable answers until the admin's retry
    deadline: (producer id, epoch) when answered NONE, else the error code (or a text: no answer)."""
    request = lambda: EndTxnRequest(  # noqa: E731 - a fresh request per attempt
        transactional_id=c.transactional_id, producer_id=c.producer_id, producer_epoch=c.producer_epoch,
        committed=True, version=c.end_txn_version,
    )
    retry = admin.new_retry()
    last: int | str = "no answer"
    while True:
        try:
            node = admin.wire.coordinators([c.transactional_id]).get(c.transactional_id)
            response = admin.wire.send(request(), node if isinstance(node, int) else None)
        except BrokerUnreachableError as exc:
            admin.wire.forget_coordinator(c.transactional_id)
            last = f"no answer ({exc.cause})"
        else:
            code = response.error_code
            if code == NONE:
                pid = getattr(response, "producer_id", -1)
                epoch = getattr(response, "producer_epoch", -1)
                known = isinstance(pid, int) and pid >= 0
                return (pid, epoch) if known else (c.producer_id, c.producer_epoch)
            if code not in RETRIABLE:
                return code
            if code == NOT_COORDINATOR:
                admin.wire.forget_coordinator(c.transactional_id)
            last = code
        if not retry.wait():
            return last


def _answer_text(answer: int | str | tuple[int, int]) -> str:
    return error_name(answer) if isinstance(answer, int) else str(answer)


def _what_is_missing(c: Committable, readings: Sequence[PartitionReading], outcome: str | None) -> str:
    if not c.first_offsets:
        return "the committable records no first offsets, so the partitions' data cannot be read for it"
    if outcome == "open":
        return f"the partitions' data shows a transaction still open there ({'; '.join(map(str, readings))})"
    if outcome == "torn":
        return f"the partitions disagree ({'; '.join(map(str, readings))})"
    return f"the partitions' data does not answer ({'; '.join(map(str, readings))})"


def _pair(d: TransactionDescription | None) -> tuple[int | None, int | None]:
    return (None, None) if d is None else (d.producer_id, d.producer_epoch)


