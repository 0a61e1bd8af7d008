"""The first step of every verdict: what a coordinator's description alone proves.

:func:`verify_committable` compares a committable with its coordinator's description and says
what to do (``commit`` / ``already_committed``), raises the error that says why not, or answers
``undecided`` when the description cannot tell (``kafka/admin/verdict.py`` then asks the
coordinator with the recorded pair and reads the data). It is pure (no I/O, the clock is a
parameter) so that every caller applies exactly one copy of the rule.
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
    state_name,
)

__all__ = ["timeout_hint", "verify_committable"]


def verify_committable(
    committable: Committable, description: TransactionDescription, *, now_ms: int, safety_margin_ms: int
) -> str:
    """What the coordinator's description alone proves about one committable.

    Returns ``"commit"`` (Ongoing with the same producer id / epoch covering the committable's
    partitions and not within ``safety_margin_ms`` of its deadline, or a commit of it under way),
    ``"already_committed"`` (completed as a commit by this very transaction) or ``"undecided"``:
    the coordinator holds another producer id or a later epoch, which does not say what became of
    this transaction (a TV2 rotation at the epoch limit, a reuse of the id after a commit or after
    an abort look the same), so the caller must ask the coordinator with the recorded pair and read
    the data (``kafka/admin/verdict.py``). Raises DataLossError (this transaction was aborted: only
    a completion of *it* leaves that state), TransactionTimeoutRiskError (too close to the
    deadline) or ProducerFencedError (open, but not on the partitions it wrote). Pure: no I/O.

    The states only this transaction's own end can leave, per protocol version
    (``kafka-txn-semantics.md``): under TV2 every completion bumps the epoch once, so
    Prepare/CompleteCommit or Prepare/CompleteAbort at E+1 are ours, and anything later than E+1
    belongs to a later use of the id; under TV1 a commit keeps E and an abort by EndTxn keeps E,
    while E+1 may be a fence of ours or a later producer's transaction, so only E decides.
    """
    c, d = committable, description
    tid = c.transactional_id
    now = now_ms
    state = d.state
    same_producer = d.producer_id == c.producer_id
    ended_epoch = c.producer_epoch + 1 if c.transaction_version >= 2 else c.producer_epoch
    if same_producer and d.producer_epoch == ended_epoch:
        if state == TxnState.COMPLETE_COMMIT:
            return "already_committed"
        if state == TxnState.PREPARE_COMMIT:
            return "commit"  # a commit is under way; the commit waits until it completes
        if state in (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT):
            raise DataLossError(
                f"the prepared transaction (producer id {c.producer_id}, epoch {c.producer_epoch}, "
                f"{c.records_text}) was aborted (coordinator state {state_name(state)}, epoch "
                f"{d.producer_epoch}){timeout_hint(c, now)}; its records can no longer be committed",
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
    return "undecided"


def timeout_hint(c: Committable, now: int) -> str:
    """For a data-loss message: that the transaction's timeout has passed, and when."""
    if now >= c.deadline_ms:
        return (
            f", after its transaction timeout of {c.transaction_timeout_ms} ms passed at "
            f"{_iso(c.deadline_ms)}"
        )
    return ""


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"
