"""The rule deciding whether a prepared transaction (a committable) may be committed.

:func:`verify_committable` compares a committable with its coordinator's description and
either says what to do (``commit`` / ``already_committed``) or raises the error that says
why not. It is pure (no I/O, the clock is a parameter) so that the admin's commit, the
explanation of a refused EndTxn and the tests all apply exactly one copy of the rule.
"""

from __future__ import annotations

import time

from airflow_provider_kafka_eos.kafka.errors import (
    DataLossError,
    ProducerFencedError,
    TransactionTimeoutRiskError,
)
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import (
    TransactionDescription,
    TxnState,
    _state,
)

__all__ = ["verify_committable"]


def verify_committable(
    committable: Committable, description: TransactionDescription, *, now_ms: int, safety_margin_ms: int
) -> str:
    """Decide whether one committable can be committed, from its coordinator's description.

    Returns ``"commit"`` (send EndTxn: Ongoing with the same producer id / epoch covering the
    committable's partitions and not within ``safety_margin_ms`` of its deadline, or a commit
    already under way) or ``"already_committed"`` (CompleteCommit by the same producer: epoch E,
    or E+1 under TV2 where completing bumps the epoch). Otherwise raises the error that says
    why not: DataLossError (aborted / timed out), TransactionTimeoutRiskError (too close to
    the deadline), ProducerFencedError (another producer id / epoch holds the id). Pure: no I/O.
    """
    c, d = committable, description
    tid = c.transactional_id
    now = now_ms
    state = d.state
    same_producer = d.producer_id == c.producer_id
    completed_epochs = (
        {c.producer_epoch, c.producer_epoch + 1} if c.transaction_version >= 2 else {c.producer_epoch}
    )
    if state == TxnState.COMPLETE_COMMIT and same_producer and d.producer_epoch in completed_epochs:
        return "already_committed"
    if state == TxnState.PREPARE_COMMIT and same_producer and d.producer_epoch in completed_epochs:
        return "commit"  # a commit is under way; EndTxn retries until it completes
    if (
        state
        in (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE, TxnState.EMPTY)
        and same_producer
        and d.producer_epoch <= c.producer_epoch + 2
    ):
        how = (
            "is no longer open: it was aborted by fencing, or the id was re-initialised"
            if state == TxnState.EMPTY
            else "was aborted by the coordinator"
        )
        raise DataLossError(
            f"the prepared transaction (producer id {c.producer_id}, epoch {c.producer_epoch}, "
            f"{c.records_text}) {how} (state {_state(state)}, epoch "
            f"{d.producer_epoch}){_timeout_hint(c, now)}; its records can no longer be committed",
            transactional_id=tid,
        )
    if state == TxnState.ONGOING and same_producer and d.producer_epoch == c.producer_epoch:
        missing = sorted(set(c.partitions) - set(d.partitions))
        if missing:
            raise ProducerFencedError(
                f"the open transaction (producer id {c.producer_id}, epoch {c.producer_epoch}) does not "
                f"cover partition(s) {', '.join(map(str, missing))} listed in the committable; it is not "
                "the transaction that was prepared",
                transactional_id=tid,
            )
        deadline = d.deadline_ms if d.deadline_ms is not None else c.deadline_ms
        if now >= deadline:
            raise DataLossError(
                f"the prepared transaction timed out at {_iso(deadline)} (started "
                f"{_iso(d.start_time_ms)}, timeout {d.timeout_ms} ms); the coordinator aborts it, so it "
                "can no longer be committed",
                transactional_id=tid,
            )
        if now + safety_margin_ms >= deadline:
            raise TransactionTimeoutRiskError(
                f"the prepared transaction times out at {_iso(deadline)}, within the "
                f"{safety_margin_ms} ms safety margin; committing now would race the coordinator's "
                "abort, so nothing was committed",
                transactional_id=tid,
            )
        return "commit"
    if not same_producer or state == TxnState.ONGOING or d.producer_epoch > c.producer_epoch:
        raise ProducerFencedError(
            f"the coordinator holds producer id {d.producer_id}, epoch {d.producer_epoch} (state "
            f"{_state(state)}), not the committable's producer id {c.producer_id}, epoch "
            f"{c.producer_epoch}: "
            "another producer has used this transactional id since it was prepared",
            transactional_id=tid,
        )
    raise ProducerFencedError(
        f"unexpected coordinator state {_state(state)} (producer id {d.producer_id}, epoch "
        f"{d.producer_epoch}) for committable producer id {c.producer_id}, epoch {c.producer_epoch}",
        transactional_id=tid,
    )


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def _timeout_hint(c: Committable, now: int) -> str:
    if now >= c.deadline_ms:
        return (
            f", after its transaction timeout of {c.transaction_timeout_ms} ms passed at "
            f"{_iso(c.deadline_ms)}"
        )
    return ""
