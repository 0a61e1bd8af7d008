"""Transaction protocol versions (TV1 / TV2) and the transaction timeout between prepare and commit.

Each test starts a dedicated embedded broker (``kafka_broker_factory``) with the transaction
version or abort-scan interval it needs; on a real cluster they skip naming that setting.
"""

from __future__ import annotations

import dataclasses

import pytest
from ops_support import client_config, create_topic, keys_for, open_transaction, unique, wait_for_state

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.errors import (
    DataLossError,
    TransactionTimeoutRiskError,
    VerdictUnknownError,
)
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker


@pytest.fixture(params=[1, 2], ids=["TV1", "TV2"])
def tv_broker(request, kafka_broker_factory):
    """A broker finalized at transaction.version 1 or 2, with a fast timed-out-transaction scan."""
    broker = kafka_broker_factory(transaction_version=request.param, abort_check_interval_ms=200)
    broker.transaction_version = request.param
    return broker


def test_commit_lifecycle_on_each_transaction_version(tv_broker):
    bootstrap = tv_broker.bootstrap
    topic = create_topic(bootstrap, unique("tv-topic"))
    with TransactionAdmin(client_config(bootstrap)) as admin:
        assert admin.transaction_version() == tv_broker.transaction_version
        committed = open_transaction(bootstrap, admin, unique("tv-c") + "-0-1", topic, keys_for("c", 4))
        aborted = open_transaction(bootstrap, admin, unique("tv-a") + "-0-1", topic, keys_for("a", 4))
        if tv_broker.transaction_version == 2:
            assert (committed.transaction_version, committed.end_txn_version) == (2, 5)
        else:
            assert committed.transaction_version == 1 and committed.end_txn_version <= 4

        assert [o.outcome for o in admin.commit([committed])] == ["committed"]
        assert [o.outcome for o in admin.commit([committed])] == ["already_committed"]
        assert [o.outcome for o in admin.abort([aborted.transactional_id])] == ["aborted"]
        before = admin.describe([aborted.transactional_id])
        with pytest.raises(DataLossError):
            admin.commit([aborted])
        assert admin.describe([aborted.transactional_id]) == before
    assert_exactly_once(count_keys(bootstrap, topic), keys_for("c", 4))


def test_transaction_timing_out_between_prepare_and_commit_is_data_loss(tv_broker):
    """The broker's abort scan (every 200 ms here) times the prepared transaction out before the
    commit task runs: the commit must fail loudly, and abort afterwards must succeed."""
    bootstrap = tv_broker.bootstrap
    topic = create_topic(bootstrap, unique("timeout-topic"))
    tid = unique("timeout") + "-0-1"
    with TransactionAdmin(client_config(bootstrap)) as admin:
        committable = open_transaction(bootstrap, admin, tid, topic, keys_for(tid, 5), timeout_ms=1_000)
        wait_for_state(admin, tid, {"CompleteAbort"}, timeout_s=20)

        with pytest.raises(DataLossError, match="can no longer be committed") as info:
            admin.commit([committable])
        assert info.value.transactional_id == tid and "data-loss.md" in str(info.value)

        assert [o.outcome for o in admin.abort([tid])] == ["already_aborted"]
    assert count_keys(bootstrap, topic) == {}


def test_end_txn_answers_for_lost_and_fenced_transactions_are_mapped(tv_broker):
    """Bypass verification to see the coordinator's own EndTxn answers: committing an aborted
    transaction (INVALID_TXN_STATE, or PRODUCER_FENCED after a TV1 timeout fence) is data loss,
    proven by the partition's data; a wrong epoch on an open one proves nothing about the pair
    that was sent (the open transaction is another's): refused as unknown. Neither changes anything."""
    bootstrap = tv_broker.bootstrap
    topic = create_topic(bootstrap, unique("endtxn-topic"))
    with TransactionAdmin(client_config(bootstrap)) as admin:
        lost = open_transaction(
            bootstrap, admin, unique("endtxn-lost") + "-0-1", topic, keys_for("l", 2), timeout_ms=1_000
        )
        wait_for_state(admin, lost.transactional_id, {"CompleteAbort"}, timeout_s=20)
        errors = admin._end_txns([lost], commit=True, outcomes={}, max_workers=1)
        assert [type(e) for e in errors] == [DataLossError]

        live = open_transaction(bootstrap, admin, unique("endtxn-live") + "-0-1", topic, keys_for("v", 2))
        before = admin.describe([live.transactional_id])
        wrong = dataclasses.replace(live, producer_epoch=live.producer_epoch + 3)
        errors = admin._end_txns([wrong], commit=True, outcomes={}, max_workers=1)
        assert [type(e) for e in errors] == [VerdictUnknownError]
        assert "not this transaction" in str(errors[0])
        assert admin.describe([live.transactional_id]) == before
        admin.commit([live])
    assert_exactly_once(count_keys(bootstrap, topic), keys_for("v", 2))


def test_commit_refuses_inside_the_safety_margin_and_changes_nothing(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap, unique("margin-topic"))
    tid = unique("margin") + "-0-1"
    with TransactionAdmin(client_config(bootstrap), safety_margin_ms=120_000) as cautious:
        committable = open_transaction(bootstrap, cautious, tid, topic, keys_for(tid, 3), timeout_ms=60_000)
        before = cautious.describe([tid])
        with pytest.raises(TransactionTimeoutRiskError, match="safety margin"):
            cautious.commit([committable])
        assert cautious.describe([tid]) == before
    assert count_keys(bootstrap, topic) == {}
    with TransactionAdmin(client_config(bootstrap)) as admin:
        admin.commit([committable])
    assert_exactly_once(count_keys(bootstrap, topic), keys_for(tid, 3))
