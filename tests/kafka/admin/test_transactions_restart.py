"""A broker restart between prepare and commit is survived; a broker that goes away mid-session
gives a bounded, clear error. Dedicated embedded brokers (they are stopped and restarted)."""

from __future__ import annotations

import time

import pytest
from ops_support import client_config, create_topic, keys_for, open_transaction, unique

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.errors import BrokerUnreachableError
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker


def test_commit_after_broker_restart_reconnects_and_commits_exactly_once(kafka_broker_factory, tmp_path):
    broker = kafka_broker_factory(data_dir=str(tmp_path / "data"))
    topic = create_topic(broker.bootstrap, unique("restart-topic"))
    tid = unique("restart") + "-0-1"
    with TransactionAdmin(client_config(broker.bootstrap)) as admin:
        committable = open_transaction(broker.bootstrap, admin, tid, topic, keys_for(tid, 6))
        broker.restart()  # same port, same data: the prepared transaction survives

        assert [o.outcome for o in admin.commit([committable])] == ["committed"]
    assert_exactly_once(count_keys(broker.bootstrap, topic), keys_for(tid, 6))


def test_broker_gone_mid_session_is_a_bounded_clear_error(kafka_broker_factory):
    broker = kafka_broker_factory()
    with TransactionAdmin(client_config(broker.bootstrap), connect_timeout_ms=1500) as admin:
        assert admin.list() == []
        broker.stop()
        started = time.monotonic()
        with pytest.raises(BrokerUnreachableError) as info:
            admin.describe(["gone-0-1"])
        elapsed = time.monotonic() - started
    assert elapsed < 10, f"took {elapsed:.1f} s"
    assert broker.bootstrap in str(info.value) and "broker-unreachable.md" in str(info.value)
