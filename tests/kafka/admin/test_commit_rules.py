"""The coordinator's description as the first step of the verdict (kafka/admin/commit_rules.py).

Only the states this transaction's own end can leave decide; every later use of the id (a TV2
rotation, a reuse after a commit or after an abort, another producer) is ``undecided``, left to
the verdict's coordinator question and the partitions' data (test_verdict.py).
"""

from __future__ import annotations

import pytest

from airflow_provider_kafka_eos.kafka.admin.commit_rules import verify_committable
from airflow_provider_kafka_eos.kafka.errors import (
    DataLossError,
    ProducerFencedError,
    TransactionTimeoutRiskError,
)
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, TopicPartition
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import TransactionDescription, TxnState

NOW = 30_000


def _committable(tv: int = 2) -> Committable:
    end_txn = 5 if tv == 2 else 3
    return Committable("p-0-1", 10, 4, (TopicPartition("t", 0),), 5, 1_000, 1_000, 60_000, tv, end_txn)


def _described(state: TxnState, *, pid=10, epoch=4, partitions=(("t", 0),), start=1_000, timeout=60_000):
    return TransactionDescription(
        "p-0-1", state, pid, epoch, timeout, start, tuple(TopicPartition(*p) for p in partitions)
    )


def _verify(c, d, now=NOW, margin=5_000):
    return verify_committable(c, d, now_ms=now, safety_margin_ms=margin)


def test_ongoing_same_producer_commits():
    assert _verify(_committable(), _described(TxnState.ONGOING)) == "commit"


@pytest.mark.parametrize(("tv", "epoch"), [(1, 4), (2, 5)])
def test_commit_complete_or_under_way_at_the_epoch_only_its_own_end_leaves(tv, epoch):
    assert _verify(_committable(tv), _described(TxnState.COMPLETE_COMMIT, epoch=epoch)) == "already_committed"
    assert _verify(_committable(tv), _described(TxnState.PREPARE_COMMIT, epoch=epoch)) == "commit"


@pytest.mark.parametrize(
    ("tv", "state", "epoch"),
    [(2, TxnState.COMPLETE_ABORT, 5), (2, TxnState.PREPARE_ABORT, 5), (1, TxnState.COMPLETE_ABORT, 4)],
)
def test_abort_at_the_epoch_only_its_own_end_leaves_is_data_loss(tv, state, epoch):
    with pytest.raises(DataLossError, match="can no longer be committed") as info:
        _verify(_committable(tv), _described(state, epoch=epoch))
    assert info.value.transactional_id == "p-0-1"


@pytest.mark.parametrize(
    ("tv", "described"),
    [
        # TV2: Empty at E+2 is a fence of ours (E+1 abort, E+2 re-init) or a commit of ours and a
        # reuse of the id (E+1 commit, E+2 init): the description cannot tell them apart.
        (2, _described(TxnState.EMPTY, epoch=6)),
        (2, _described(TxnState.COMPLETE_COMMIT, epoch=4)),
        (2, _described(TxnState.COMPLETE_ABORT, epoch=7)),
        (2, _described(TxnState.ONGOING, epoch=6)),
        # a rotation at the epoch limit: another producer id, whatever became of ours
        (2, _described(TxnState.COMPLETE_COMMIT, pid=11, epoch=0)),
        (2, _described(TxnState.COMPLETE_ABORT, pid=11, epoch=0)),
        (2, _described(TxnState.ONGOING, pid=11)),
        # TV1: E+1 in CompleteAbort is a fence of ours or a later producer's aborted transaction
        (1, _described(TxnState.COMPLETE_ABORT, epoch=5)),
        (1, _described(TxnState.COMPLETE_COMMIT, epoch=5)),
        (1, _described(TxnState.EMPTY, epoch=5)),
    ],
)
def test_a_later_use_of_the_id_is_undecided(tv, described):
    assert _verify(_committable(tv), described) == "undecided"


def test_open_but_not_on_its_partitions_is_not_the_prepared_transaction():
    with pytest.raises(ProducerFencedError, match="does not cover"):
        _verify(_committable(), _described(TxnState.ONGOING, partitions=(("t", 1),)))


def test_past_deadline_while_still_ongoing_is_data_loss():
    with pytest.raises(DataLossError, match="timed out"):
        _verify(_committable(), _described(TxnState.ONGOING), now=61_000)


def test_within_safety_margin_refuses():
    with pytest.raises(TransactionTimeoutRiskError, match="safety margin"):
        _verify(_committable(), _described(TxnState.ONGOING), now=57_000)
    assert _verify(_committable(), _described(TxnState.ONGOING), now=57_000, margin=1_000) == "commit"
