"""Transactions through the embedded broker with unmodified clients.

confluent-kafka transactional producers write; raw kafka-python protocol requests
(InitProducerId / EndTxn with an explicit pid/epoch) act on their transactions from another
connection, as the commit and abort tasks do; a ``read_committed`` consumer counts every key.
Nothing is mocked.
"""

from __future__ import annotations

import pytest
from kafka.errors import TransactionalIdNotFoundError
from kafka.protocol.producer.transaction import EndTxnRequest, InitProducerIdRequest

from kafka_eos_testing.broker.txn_state import Err
from kafka_eos_testing.broker.txn_testkit import (
    WireProbe,
    admin,
    create_topic,
    describe,
    describe_settled,
    end_offsets,
    keys,
    leave_open,
    produce_in_transaction,
    retry_concurrent,
    transactional_producer,
    wait_for,
)
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.broker, pytest.mark.broker_double]


@pytest.fixture(scope="module")
def txn_admin(kafka_broker):
    client = admin(kafka_broker.bootstrap)
    yield client
    client.close()


def end_txn(bootstrap: str, transactional_id: str, pid: int, epoch: int, commit: bool, version: int = 3):
    with WireProbe(bootstrap) as probe:
        return probe.send(
            EndTxnRequest(
                transactional_id=transactional_id, producer_id=pid, producer_epoch=epoch, committed=commit
            ),
            version=version,
        )


def init_producer_id(
    bootstrap: str, transactional_id: str, version: int = 4, timeout_ms: int = 60000, **fields
):
    with WireProbe(bootstrap) as probe:
        return probe.send(
            InitProducerIdRequest(
                transactional_id=transactional_id, transaction_timeout_ms=timeout_ms, **fields
            ),
            version=version,
        )


def committed_then_open(bootstrap: str, topic: str, tid: str, good: list[bytes], pending: list[bytes]):
    """One committed transaction (``good``), then an open one (``pending``) left behind."""
    producer = transactional_producer(bootstrap, tid)
    produce_in_transaction(producer, topic, good)
    producer.commit_transaction(30)
    produce_in_transaction(producer, topic, pending)
    del producer  # released, not closed: the transaction stays open


# ----------------------------------------------------------------------------- aborted records


def test_explicit_abort_is_never_delivered_to_read_committed(kafka_broker, unique_name):
    topic, tid = unique_name("abort"), unique_name("tid")
    good, bad = keys("good", 200), keys("bad", 200)
    producer = transactional_producer(kafka_broker.bootstrap, tid)
    produce_in_transaction(producer, topic, good)
    producer.commit_transaction(30)
    produce_in_transaction(producer, topic, bad)
    producer.abort_transaction(30)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), good)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted"), good + bad)


def test_init_producer_id_on_open_transaction_aborts_it_and_returns_e_plus_2(
    kafka_broker, txn_admin, unique_name
):
    topic, tid = unique_name("fence"), unique_name("tid")
    good, bad = keys("good", 100), keys("bad", 100)
    committed_then_open(kafka_broker.bootstrap, topic, tid, good, bad)
    before = describe(txn_admin, tid)
    assert before.state.value == "Ongoing"
    epoch = before.producer_epoch

    first = init_producer_id(kafka_broker.bootstrap, tid)
    assert first.error_code == Err.CONCURRENT_TRANSACTIONS
    fenced = describe_settled(txn_admin, tid)
    assert (fenced.state.value, fenced.producer_epoch) == ("CompleteAbort", epoch + 1)
    retry = init_producer_id(kafka_broker.bootstrap, tid)
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (0, before.producer_id, epoch + 2)

    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), good)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted"), good + bad)
    lso, hw = end_offsets(kafka_broker.bootstrap, topic)
    assert lso == hw


def test_timed_out_transaction_is_aborted_and_fenced(kafka_broker_factory, unique_name):
    broker = kafka_broker_factory(abort_check_interval_ms=50)
    topic, tid = unique_name("timeout"), unique_name("tid")
    good, bad = keys("good", 100), keys("bad", 100)
    committed_then_open(broker.bootstrap, topic, tid, good, [])
    leave_open(broker.bootstrap, tid, topic, bad, **{"transaction.timeout.ms": 2500})
    client = admin(broker.bootstrap)
    try:
        open_txn = describe(client, tid)
        assert open_txn.state.value == "Ongoing" and open_txn.transaction_timeout_ms == 2500
        aborted = wait_for(
            lambda: (d := describe(client, tid)).state.value == "CompleteAbort" and d, "the timeout abort"
        )
    finally:
        client.close()
    assert aborted.producer_epoch == open_txn.producer_epoch + 1
    assert aborted.transaction_start_time_ms == open_txn.transaction_start_time_ms
    # TV1 EndTxn from the old producer is fenced; TV2: abort is a no-op retry, commit is refused
    pid, epoch = open_txn.producer_id, open_txn.producer_epoch
    assert end_txn(broker.bootstrap, tid, pid, epoch, True, version=3).error_code == Err.PRODUCER_FENCED
    assert end_txn(broker.bootstrap, tid, pid, epoch, True, version=5).error_code == Err.INVALID_TXN_STATE
    assert end_txn(broker.bootstrap, tid, pid, epoch, False, version=5).error_code == Err.NONE
    assert_exactly_once(count_keys(broker.bootstrap, topic), good)
    assert_exactly_once(count_keys(broker.bootstrap, topic, isolation="read_uncommitted"), good + bad)


# ----------------------------------------------------------------------------- LSO and commit by resume


def test_lso_stays_at_first_offset_of_open_transaction_until_it_ends(kafka_broker, txn_admin, unique_name):
    topic, tid = unique_name("lso"), unique_name("tid")
    create_topic(kafka_broker.bootstrap, topic, 1)
    good, pending = keys("good", 10), keys("pending", 10)
    committed_then_open(kafka_broker.bootstrap, topic, tid, good, pending)
    lso, hw = end_offsets(kafka_broker.bootstrap, topic)
    assert lso == len(good) + 1  # ten records and the commit marker precede the open transaction
    assert hw == lso + len(pending)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), good)

    txn = describe(txn_admin, tid)
    assert end_txn(kafka_broker.bootstrap, tid, txn.producer_id, txn.producer_epoch, True).error_code == 0
    lso, hw = end_offsets(kafka_broker.bootstrap, topic)
    assert lso == hw == len(good) + 1 + len(pending) + 1
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), good + pending)


@pytest.mark.parametrize("version", [1, 3, 4, 5])
def test_commit_by_resume_from_another_client_is_idempotent(kafka_broker, txn_admin, unique_name, version):
    topic, tid = unique_name("resume"), unique_name("tid")
    records = keys("k", 300)
    leave_open(kafka_broker.bootstrap, tid, topic, records)
    prepared = describe(txn_admin, tid)
    assert prepared.state.value == "Ongoing"
    assert count_keys(kafka_broker.bootstrap, topic) == {}
    pid, epoch = prepared.producer_id, prepared.producer_epoch

    first = end_txn(kafka_broker.bootstrap, tid, pid, epoch, True, version=version)
    assert first.error_code == Err.NONE
    # the same EndTxn again: NONE once the markers landed (CONCURRENT_TRANSACTIONS until then)
    second = retry_concurrent(lambda: end_txn(kafka_broker.bootstrap, tid, pid, epoch, True, version=version))
    assert second.error_code == Err.NONE
    done = describe_settled(txn_admin, tid)
    assert done.state.value == "CompleteCommit"
    if version >= 5:  # TV2: completion bumps the epoch, and both answers carry the new one
        assert (first.producer_id, first.producer_epoch) == (pid, epoch + 1)
        assert (second.producer_id, second.producer_epoch) == (pid, epoch + 1)
        assert done.producer_epoch == epoch + 1
    else:
        assert done.producer_epoch == epoch
    # the opposite operation after a commit is refused and changes nothing
    assert end_txn(kafka_broker.bootstrap, tid, pid, epoch, False, version=version).error_code == (
        Err.INVALID_TXN_STATE
    )
    assert describe(txn_admin, tid).state.value == "CompleteCommit"
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), records)


@pytest.mark.parametrize("version", [3, 5])
def test_commit_after_abort_is_invalid_txn_state_and_changes_nothing(
    kafka_broker, txn_admin, unique_name, version
):
    topic, tid = unique_name("aborted"), unique_name("tid")
    leave_open(kafka_broker.bootstrap, tid, topic, keys("k", 50))
    txn = describe(txn_admin, tid)
    pid, epoch = txn.producer_id, txn.producer_epoch
    assert end_txn(kafka_broker.bootstrap, tid, pid, epoch, False, version=version).error_code == 0
    before = describe_settled(txn_admin, tid)
    _, hw_before = end_offsets(kafka_broker.bootstrap, topic)
    assert end_txn(kafka_broker.bootstrap, tid, pid, epoch, True, version=version).error_code == (
        Err.INVALID_TXN_STATE
    )
    assert describe(txn_admin, tid) == before
    assert end_offsets(kafka_broker.bootstrap, topic) == (hw_before, hw_before)
    assert count_keys(kafka_broker.bootstrap, topic) == {}


def test_end_txn_needs_the_exact_producer_id_and_epoch(kafka_broker, txn_admin, unique_name):
    topic, tid = unique_name("exact"), unique_name("tid")
    records = keys("k", 20)
    leave_open(kafka_broker.bootstrap, tid, topic, records)
    txn = describe(txn_admin, tid)
    pid, epoch = txn.producer_id, txn.producer_epoch
    bs = kafka_broker.bootstrap
    assert end_txn(bs, tid, pid + 1, epoch, True).error_code == Err.INVALID_PRODUCER_ID_MAPPING
    assert end_txn(bs, tid, pid, epoch + 1, True).error_code == Err.PRODUCER_FENCED
    assert end_txn(bs, tid, pid, epoch + 1, True, version=1).error_code == Err.INVALID_PRODUCER_EPOCH  # < v2
    assert end_txn(bs, unique_name("nobody"), pid, epoch, True).error_code == Err.INVALID_PRODUCER_ID_MAPPING
    assert describe(txn_admin, tid).state.value == "Ongoing"
    assert end_txn(bs, tid, pid, epoch, True).error_code == 0
    assert_exactly_once(count_keys(bs, topic), records)


# ----------------------------------------------------------------------------- InitProducerId


@pytest.mark.parametrize("timeout_ms", [0, 900001])
def test_invalid_transaction_timeout(kafka_broker, txn_admin, unique_name, timeout_ms):
    tid = unique_name("tid")
    assert init_producer_id(kafka_broker.bootstrap, tid, timeout_ms=timeout_ms).error_code == (
        Err.INVALID_TRANSACTION_TIMEOUT
    )
    with pytest.raises(TransactionalIdNotFoundError):  # refused: nothing was created
        describe(txn_admin, tid)


def test_confluent_producer_with_too_long_timeout_fails_init(kafka_broker_factory, unique_name):
    from confluent_kafka import KafkaException

    broker = kafka_broker_factory(transaction_max_timeout_ms=5000)
    with pytest.raises(KafkaException, match=r"(?i)timeout"):
        transactional_producer(broker.bootstrap, unique_name("tid"), **{"transaction.timeout.ms": 6000})


@pytest.mark.parametrize(
    ("version", "fenced_code"), [(3, Err.INVALID_PRODUCER_EPOCH), (4, Err.PRODUCER_FENCED)]
)
def test_init_producer_id_expected_epoch_checks(kafka_broker, unique_name, version, fenced_code):
    tid, bs = unique_name("tid"), kafka_broker.bootstrap
    first = init_producer_id(bs, tid, version=version)
    pid = first.producer_id
    bumped = init_producer_id(bs, tid, version=version, producer_id=pid, producer_epoch=0)
    assert (bumped.error_code, bumped.producer_epoch) == (0, 1)
    retry = init_producer_id(bs, tid, version=version, producer_id=pid, producer_epoch=0)
    assert (retry.error_code, retry.producer_epoch) == (0, 1)  # lost answer retried: no second bump
    assert (
        init_producer_id(bs, tid, version=version, producer_id=pid, producer_epoch=9).error_code
        == fenced_code
    )
    assert init_producer_id(bs, tid, version=version, producer_id=pid, producer_epoch=-1).error_code == (
        Err.INVALID_REQUEST
    )


# ----------------------------------------------------------------------------- offsets in transactions


@pytest.mark.parametrize("commit", [True, False])
def test_send_offsets_to_transaction_reaches_the_group_only_on_commit(kafka_broker, unique_name, commit):
    """Consume-transform-produce: transactional offsets become the group's only on commit."""
    from confluent_kafka import Consumer, TopicPartition

    source, sink, group, tid = unique_name("src"), unique_name("sink"), unique_name("grp"), unique_name("tid")
    create_topic(kafka_broker.bootstrap, source, 1)
    seed = transactional_producer(kafka_broker.bootstrap, unique_name("seed"))
    produce_in_transaction(seed, source, keys("in", 20))
    seed.commit_transaction(30)
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.subscribe([source])
        seen = wait_for(lambda: consumer.poll(0.5), "a record from the source topic")
        producer = transactional_producer(kafka_broker.bootstrap, tid)
        producer.begin_transaction()
        producer.produce(sink, key=seen.key(), value=b"out")
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, seen.offset() + 1)], consumer.consumer_group_metadata(), 30
        )
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        [committed] = consumer.committed([TopicPartition(source, 0)], timeout=10)
    finally:
        consumer.close()
    assert committed.offset == (seen.offset() + 1 if commit else -1001)  # -1001: no committed offset
    assert_exactly_once(count_keys(kafka_broker.bootstrap, sink), [seen.key()] if commit else [])


def test_new_confluent_producer_with_the_same_id_fences_and_aborts_the_open_transaction(
    kafka_broker, txn_admin, unique_name
):
    """Abort by fencing the way Flink's restore does it: a new producer's init_transactions()."""
    topic, tid = unique_name("refence"), unique_name("tid")
    good, bad = keys("good", 30), keys("bad", 30)
    committed_then_open(kafka_broker.bootstrap, topic, tid, good, bad)
    before = describe(txn_admin, tid)
    successor = transactional_producer(kafka_broker.bootstrap, tid)  # retries CONCURRENT_TRANSACTIONS itself
    after = describe(txn_admin, tid)
    assert (after.state.value, after.producer_id, after.producer_epoch) == (
        "Empty",
        before.producer_id,
        before.producer_epoch + 2,
    )
    produce_in_transaction(successor, topic, keys("next", 30))
    successor.commit_transaction(30)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), good + keys("next", 30))
