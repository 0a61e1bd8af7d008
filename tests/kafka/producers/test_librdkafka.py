"""PartitionTransaction against the embedded broker: prepare, verify, fence, release.

Each test ends with a read_committed consumer counting keys, because the point of every
step here is what such a consumer will see.
"""

from __future__ import annotations

import gc
import time

import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import BrokerUnreachableError, ProducerFencedError
from airflow_provider_kafka_eos.kafka.producers.librdkafka import PartitionTransaction, TransactionProtocol
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import TxnState
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker


@pytest.fixture
def admin(kafka_broker):
    with TransactionAdmin(KafkaClientConfig.from_mapping(kafka_broker.client_config())) as admin:
        yield admin


def _txn(kafka_broker, admin, tid, topic, **kwargs):
    return PartitionTransaction(
        confluent_config=kafka_broker.client_config(),
        transactional_id=tid,
        topic=topic,
        transaction_timeout_ms=kwargs.pop("transaction_timeout_ms", 60_000),
        protocol=TransactionProtocol.from_admin(admin),
        describe=admin.describe,
        **kwargs,
    )


def _keys(tag: str, n: int) -> list[str]:
    return [f"{tag}-{i}" for i in range(n)]


def test_statistics_report_the_producer_id_and_epoch_the_coordinator_holds(kafka_broker, admin, unique_name):
    """librdkafka's stats JSON (eos.producer_id/epoch) is our only view of the pid/epoch: confirm it."""
    tid, topic = unique_name("stats"), unique_name("topic")
    first = _txn(kafka_broker, admin, tid, topic)
    first.begin()
    first.write_rows(_keys("a", 3), [b"v"] * 3)
    committable = first.prepare()
    described = admin.describe([tid])[tid]
    assert (committable.producer_id, committable.producer_epoch) == (
        described.producer_id,
        described.producer_epoch,
    )
    assert described.state == TxnState.ONGOING
    # A second producer with the same id fences the first: the stats must show the bumped epoch.
    second = _txn(kafka_broker, admin, tid, topic)
    second.begin()
    second_id, second_epoch = second.identity()
    assert second_id == committable.producer_id
    assert second_epoch > committable.producer_epoch
    assert admin.describe([tid])[tid].producer_epoch == second_epoch
    second.release()
    assert count_keys(kafka_broker.bootstrap, topic) == {}  # the fenced transaction was aborted


def test_released_producer_leaves_the_transaction_open_and_committable(kafka_broker, admin, unique_name):
    """Regression guard: confluent-kafka 2.16 close() aborts; dropping the reference must not.

    If a future client release aborts on destroy, the describe below shows CompleteAbort and the
    commit raises DataLossError: this test fails at once.
    """
    tid, topic = unique_name("release"), unique_name("topic")
    txn = _txn(kafka_broker, admin, tid, topic)
    txn.begin()
    txn.write_rows(_keys("r", 50), [b"x" * 20] * 50)
    committable = txn.prepare()
    assert txn._producer is None  # prepare() released it
    del txn
    gc.collect()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # give a destroying client every chance to send EndTxn
        assert admin.describe([tid])[tid].state == TxnState.ONGOING
        time.sleep(0.2)
    assert count_keys(kafka_broker.bootstrap, topic) == {}  # prepared, not visible
    outcomes = admin.commit([committable])
    assert [o.outcome for o in outcomes] == ["committed"]
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys("r", 50))


def test_retry_fences_the_zombie_attempt_and_only_the_retry_commits(kafka_broker, admin, unique_name):
    """Invariant 6: a retried attempt (same id) fences the first; the zombie cannot prepare."""
    tid, topic = unique_name("zombie"), unique_name("topic")
    zombie = _txn(kafka_broker, admin, tid, topic)
    zombie.begin()
    zombie.write_rows(_keys("k", 20), [b"zombie"] * 20)
    zombie.flush()
    retry = _txn(kafka_broker, admin, tid, topic)
    retry.begin()
    retry.write_rows(_keys("k", 20), [b"retry"] * 20)
    committable = retry.prepare()
    with pytest.raises(ProducerFencedError) as excinfo:
        zombie.write_rows(_keys("late", 1), [b"late"])
        zombie.prepare()
    assert tid in str(excinfo.value) and "kafka-eos-txn runbook " in str(excinfo.value)
    assert committable.producer_epoch > zombie.producer_epoch
    admin.commit([committable])
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys("k", 20))
    assert (
        count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted")[b"k-0"] == 2
    )  # zombie's, aborted


def test_empty_partition_yields_no_committable(kafka_broker, admin, unique_name):
    """Invariant 5: nothing written -> no committable, and no open transaction on the coordinator."""
    tid = unique_name("empty")
    txn = _txn(kafka_broker, admin, tid, unique_name("topic"))
    txn.begin()
    assert txn.prepare() is None
    assert admin.describe([tid])[tid].state != TxnState.ONGOING


def test_headers_and_explicit_partitions_reach_the_topic(kafka_broker, admin, unique_name):
    from confluent_kafka import Consumer, TopicPartition

    tid, topic = unique_name("hdr"), unique_name("topic")
    txn = _txn(kafka_broker, admin, tid, topic)
    txn.begin()
    txn.write_rows(
        ["a", "b"],
        [b"1", b"2"],
        headers=[[{"key": "source", "value": b"test"}], None],
        partitions=[0, 0],
    )
    committable = txn.prepare()
    assert [p.partition for p in committable.partitions] == [0]
    admin.commit([committable])
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), ["a", "b"])
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap,
            "group.id": unique_name("g"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = {}
        deadline = time.monotonic() + 20
        while len(seen) < 2 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen[msg.key()] = msg.headers()
    finally:
        consumer.close()
    assert seen[b"a"] == [("source", b"test")]
    assert not seen[b"b"]


def test_unreachable_broker_is_a_clear_error(unique_name):
    """No broker: init_transactions times out into BrokerUnreachableError naming id and runbook."""
    tid = unique_name("nobroker")
    txn = PartitionTransaction(
        confluent_config={"bootstrap.servers": "127.0.0.1:1", "socket.connection.setup.timeout.ms": 1000},
        transactional_id=tid,
        topic="t",
        transaction_timeout_ms=60_000,
        protocol=TransactionProtocol(2, 5),
        describe=lambda ids: {},
        init_timeout_s=3,
    )
    with pytest.raises(BrokerUnreachableError) as excinfo:
        txn.begin()
    assert tid in str(excinfo.value)
    assert "kafka-eos-txn runbook broker-unreachable (" in str(excinfo.value)


def test_a_bare_system_error_from_flush_is_named_by_what_the_producer_recorded():
    """confluent-kafka sometimes ends a fenced producer's flush() with a SystemError that carries
    no cause (seen on Kafka 4.4 in the zombie test above, not reproducible on demand): the
    producer's own record of librdkafka's fatal error must then decide the error class. The
    exception is built here because that race cannot be forced against a broker."""
    from airflow_provider_kafka_eos.kafka.errors import KafkaEosError
    from airflow_provider_kafka_eos.kafka.producers.librdkafka import translate_error

    bare = SystemError(
        "<method 'flush' of 'cimpl.Producer' objects> returned NULL without setting an exception"
    )
    fenced = "KafkaError{code=_FENCED,val=-144,str=\"Producer fenced by newer instance\"}"
    named = translate_error(bare, "tid-0-1", "flush", known_cause=fenced)
    assert isinstance(named, ProducerFencedError) and "Producer fenced" in str(named)
    unnamed = translate_error(bare, "tid-0-1", "flush")
    assert type(unnamed) is KafkaEosError and "returned NULL" in str(unnamed)
