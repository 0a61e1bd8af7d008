"""The window between EndTxn and the markers: Kafka writes markers asynchronously.

Until they land, the transactional id answers CONCURRENT_TRANSACTIONS and read_committed
consumers stop at the transaction. The embedded broker opens the same window on request
(``marker_delay_ms``), so the core's retries through it are tested on both brokers; on real
Kafka the window is Kafka's own (usually milliseconds on one node), so there the assertions
are only the ones that hold whichever way the race goes.
"""

from __future__ import annotations

import pytest
from ops_support import client_config, create_topic, keys_for, open_transaction, unique

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from kafka_eos_testing.broker.txn_testkit import WireProbe
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker

DELAY_MS = 1500
CONCURRENT_TRANSACTIONS = 51


@pytest.fixture
def delayed(kafka_broker_factory):
    broker = kafka_broker_factory(marker_delay_ms=DELAY_MS, partitions=2)
    with TransactionAdmin(client_config(broker.bootstrap)) as admin:
        yield broker, admin


def test_fencing_right_after_a_commit_waits_for_the_markers(delayed):
    """InitProducerId during PrepareCommit answers CONCURRENT_TRANSACTIONS; the core retries it."""
    from kafka.protocol.producer.transaction import InitProducerIdRequest

    broker, admin = delayed
    topic = create_topic(broker.bootstrap, unique("window"), partitions=2)
    tid = unique("window") + "-0-1"
    keys = keys_for(tid, 10)
    committable = open_transaction(broker.bootstrap, admin, tid, topic, keys, partitions=(0, 1))

    assert [o.outcome for o in admin.commit([committable])] == ["committed"]
    if broker.embedded:  # the injected window is long enough to observe deterministically
        with WireProbe(broker.bootstrap) as probe:  # one node: it is the coordinator
            answer = probe.send(
                InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000), version=3
            )
        assert answer.error_code == CONCURRENT_TRANSACTIONS
    fenced = admin.fence(tid, 60000)

    assert fenced.producer_epoch > committable.producer_epoch
    assert admin.describe([tid])[tid].state == "Empty"  # InitProducerId after CompleteCommit
    assert_exactly_once(count_keys(broker.bootstrap, topic), keys)


def test_abort_during_a_commit_reports_the_commit(delayed):
    """An abort that finds the commit under way waits for it and says so; nothing is lost."""
    broker, admin = delayed
    topic = create_topic(broker.bootstrap, unique("window-abort"), partitions=2)
    tid = unique("window-abort") + "-0-1"
    keys = keys_for(tid, 10)
    committable = open_transaction(broker.bootstrap, admin, tid, topic, keys, partitions=(0, 1))
    admin.commit([committable])

    outcomes = admin.abort([tid])

    assert [o.outcome for o in outcomes] == ["already_committed"]
    assert_exactly_once(count_keys(broker.bootstrap, topic), keys)


def test_the_next_transaction_of_the_same_producer_waits_out_the_window(delayed, unique_name):
    """A producer that commits and at once begins again meets PrepareCommit; librdkafka retries."""
    from confluent_kafka import Producer

    broker, _ = delayed
    topic = unique_name("window-next")
    producer = Producer(
        broker.client_config(**{"transactional.id": unique_name("window-next"), "linger.ms": 0})
    )
    producer.init_transactions(30)
    expected = []
    for batch in range(3):
        producer.begin_transaction()
        for i in range(5):
            key = f"{batch}-{i}".encode()
            producer.produce(topic, key=key, value=b"v")
            expected.append(key)
        producer.commit_transaction(30)
    del producer
    assert_exactly_once(count_keys(broker.bootstrap, topic), expected)


def test_a_commit_repeated_while_the_markers_are_in_flight_sends_no_end_txn(delayed):
    """The retry of a commit task finds PrepareCommit: it waits for CompleteCommit, EndTxn is not resent."""
    broker, admin = delayed
    topic = create_topic(broker.bootstrap, unique("window-again"), partitions=2)
    tid = unique("window-again") + "-0-1"
    keys = keys_for(tid, 10)
    committable = open_transaction(broker.bootstrap, admin, tid, topic, keys, partitions=(0, 1))
    admin.commit([committable])
    sent = admin.requests_sent.get("EndTxn", 0)

    again = admin.commit([committable])

    assert [o.outcome for o in again] == ["already_committed"]
    assert admin.requests_sent.get("EndTxn", 0) == sent
    assert_exactly_once(count_keys(broker.bootstrap, topic), keys)
