"""ListTransactions / DescribeTransactions / DescribeProducers / WriteTxnMarkers as the Java admin sees them.

Transactions come from unmodified confluent-kafka producers; the admin side is kafka-python's
``KafkaAdminClient`` (KIP-664 calls), plus raw requests where a field is not exposed by it.
"""

from __future__ import annotations

import time

import pytest
from kafka import TopicPartition
from kafka.admin import AbortTransactionSpec
from kafka.errors import TransactionalIdNotFoundError
from kafka.protocol.admin.transactions import ListTransactionsRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest

from kafka_eos_testing.broker.txn_state import Err
from kafka_eos_testing.broker.txn_testkit import (
    WireProbe,
    admin,
    create_topic,
    describe,
    end_offsets,
    keys,
    leave_open,
    transactional_producer,
)
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.broker, pytest.mark.broker_double]


@pytest.fixture(scope="module")
def txn_admin(kafka_broker):
    client = admin(kafka_broker.bootstrap)
    yield client
    client.close()


def listed(txn_admin, **filters) -> dict[str, tuple[int, str]]:
    out = {}
    for rows in txn_admin.list_transactions(**filters).values():
        for row in rows:
            out[row.transactional_id] = (row.producer_id, row.state.value)
    return out


@pytest.fixture(scope="module")
def population(kafka_broker, txn_admin):
    """Under one unique prefix: two open transactions, one committed, one Empty."""
    from kafka_eos_testing.embedded import unique_name

    prefix = unique_name("adm")
    topic = unique_name("adm-topic")
    create_topic(kafka_broker.bootstrap, topic, 1)
    started = int(time.time() * 1000)
    for name in ("open-1", "open-2"):
        leave_open(kafka_broker.bootstrap, f"{prefix}-{name}", topic, keys(name, 5))
    producer = transactional_producer(kafka_broker.bootstrap, f"{prefix}-done")
    producer.begin_transaction()
    producer.produce(topic, key=b"done", value=b"v")
    producer.commit_transaction(30)
    del producer
    with WireProbe(kafka_broker.bootstrap) as probe:
        assert (
            probe.send(
                InitProducerIdRequest(transactional_id=f"{prefix}-empty", transaction_timeout_ms=5000),
                version=4,
            ).error_code
            == 0
        )
    return {"prefix": prefix, "topic": topic, "started": started}


def test_list_by_pattern_and_state(txn_admin, population):
    prefix = population["prefix"]
    mine = listed(txn_admin, transactional_id_pattern=f"{prefix}-.*")
    assert {tid.removeprefix(prefix + "-"): state for tid, (_, state) in mine.items()} == {
        "open-1": "Ongoing",
        "open-2": "Ongoing",
        "done": "CompleteCommit",
        "empty": "Empty",
    }
    ongoing = listed(txn_admin, transactional_id_pattern=f"{prefix}-.*", state_filters=["Ongoing"])
    assert set(ongoing) == {f"{prefix}-open-1", f"{prefix}-open-2"}
    # the pattern must match the whole id (Java Matcher.matches), not a prefix of it
    assert listed(txn_admin, transactional_id_pattern=f"{prefix}-open") == {}


def test_list_by_producer_id_and_duration(txn_admin, population):
    prefix = population["prefix"]
    open_1 = describe(txn_admin, f"{prefix}-open-1")
    by_pid = listed(txn_admin, producer_id_filters=[open_1.producer_id])
    assert by_pid == {f"{prefix}-open-1": (open_1.producer_id, "Ongoing")}
    age = int(time.time() * 1000) - open_1.transaction_start_time_ms
    old = listed(txn_admin, transactional_id_pattern=f"{prefix}-open-.*", duration_filter_ms=age + 60_000)
    assert old == {}
    young = listed(txn_admin, transactional_id_pattern=f"{prefix}-open-.*", duration_filter_ms=0)
    assert set(young) == {f"{prefix}-open-1", f"{prefix}-open-2"}


def test_list_reports_unknown_state_filters_and_bad_patterns(kafka_broker, population):
    with WireProbe(kafka_broker.bootstrap) as probe:
        r = probe.send(
            ListTransactionsRequest(state_filters=["Bogus"], producer_id_filters=[], duration_filter=-1),
            version=1,
        )
        assert (r.error_code, r.unknown_state_filters, r.transaction_states) == (0, ["Bogus"], [])
        r = probe.send(
            ListTransactionsRequest(
                state_filters=[], producer_id_filters=[], transactional_id_pattern="(unclosed"
            ),
            version=2,
        )
        assert r.error_code == Err.INVALID_REGULAR_EXPRESSION


def test_describe_reports_what_the_java_admin_would(txn_admin, population):
    prefix, topic = population["prefix"], population["topic"]
    result = txn_admin.describe_transactions([f"{prefix}-open-1", f"{prefix}-done", f"{prefix}-empty"])
    open_1, done, empty = (result[f"{prefix}-{n}"] for n in ("open-1", "done", "empty"))
    assert open_1.state.value == "Ongoing" and open_1.transaction_timeout_ms == 60000
    assert open_1.topic_partitions == {TopicPartition(topic, 0)}
    assert population["started"] <= open_1.transaction_start_time_ms <= int(time.time() * 1000)
    assert done.state.value == "CompleteCommit" and done.topic_partitions == set()
    assert (empty.state.value, empty.transaction_start_time_ms, empty.transaction_timeout_ms) == (
        "Empty",
        -1,
        5000,
    )
    with pytest.raises(TransactionalIdNotFoundError):
        txn_admin.describe_transactions([f"{prefix}-never-used"])


def test_describe_producers_shows_open_transaction_start_offset(kafka_broker, txn_admin, unique_name):
    topic, tid = unique_name("producers"), unique_name("tid")
    create_topic(kafka_broker.bootstrap, topic, 1)
    producer = transactional_producer(kafka_broker.bootstrap, tid)
    producer.begin_transaction()
    for key in keys("c", 3):
        producer.produce(topic, key=key, value=b"v")
    producer.commit_transaction(30)  # offsets 0-2 + marker at 3
    leave_open(kafka_broker.bootstrap, tid, topic, keys("o", 4))  # fences the first producer: same id
    txn = describe(txn_admin, tid)
    tp = TopicPartition(topic, 0)
    state = txn_admin.describe_producers([tp])[tp]
    active = {p.producer_id: p for p in state.active_producers}
    assert active[txn.producer_id].producer_epoch == txn.producer_epoch
    assert active[txn.producer_id].current_transaction_start_offset == 4
    assert active[txn.producer_id].last_sequence == 3


def test_write_txn_markers_aborts_a_hanging_partition(kafka_broker, txn_admin, unique_name):
    """KIP-664 ``abortTransaction``: the partition closes the transaction without the coordinator."""
    topic, tid = unique_name("hanging"), unique_name("tid")
    create_topic(kafka_broker.bootstrap, topic, 1)
    leave_open(kafka_broker.bootstrap, tid, topic, keys("h", 10))
    txn = describe(txn_admin, tid)
    lso, hw = end_offsets(kafka_broker.bootstrap, topic)
    assert (lso, hw) == (0, 10)
    tp = TopicPartition(topic, 0)
    txn_admin.abort_transaction(
        AbortTransactionSpec(
            topic_partition=tp,
            producer_id=txn.producer_id,
            producer_epoch=txn.producer_epoch,
            coordinator_epoch=-1,
        )
    )
    assert end_offsets(kafka_broker.bootstrap, topic) == (11, 11)
    assert count_keys(kafka_broker.bootstrap, topic) == {}
    assert_exactly_once(
        count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted"), keys("h", 10)
    )
    producers = txn_admin.describe_producers([tp])[tp].active_producers
    assert [p.current_transaction_start_offset for p in producers if p.producer_id == txn.producer_id] == [-1]
