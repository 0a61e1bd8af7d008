"""The connection's producer keys on the wire: the Arrow producer honours them, seen from a broker.

Each test produces through ``ArrowPartitionTransaction`` with settings made from connection keys
(``arrow_producer_settings``), commits by resume, and ends with a read_committed consumer that
counts every key. What the keys change is read back raw: a Fetch returns the stored record
batches, whose headers carry the codec bits, the record counts and the sizes (the broker keeps
a batch's bytes when the topic's compression.type is ``producer``, Kafka's default).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import KafkaEosError, UsageError
from airflow_provider_kafka_eos.kafka.producers.arrow import ArrowPartitionTransaction
from airflow_provider_kafka_eos.kafka.producers.compression import CODECS
from airflow_provider_kafka_eos.kafka.producers.librdkafka import TransactionProtocol
from airflow_provider_kafka_eos.kafka.producers.producer_config import arrow_producer_settings
from kafka_eos_testing.broker.txn_testkit import create_topic
from kafka_eos_testing.stored_batches import placed_batches, stored_batches
from kafka_eos_testing.transactions import wait_until_committed
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker


def _admin(bootstrap: str) -> TransactionAdmin:
    return TransactionAdmin(KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap}))


def _transaction(admin: TransactionAdmin, tid: str, topic: str, keys: dict) -> ArrowPartitionTransaction:
    txn = ArrowPartitionTransaction(
        admin=admin, transactional_id=tid, topic=topic, transaction_timeout_ms=60_000,
        protocol=TransactionProtocol.from_admin(admin), settings=arrow_producer_settings(keys),
    )
    txn.begin()
    return txn


def _commit(admin: TransactionAdmin, txn: ArrowPartitionTransaction) -> None:
    committable = txn.prepare()
    assert committable is not None
    assert [o.outcome for o in admin.commit([committable])] == ["committed"]
    wait_until_committed(admin, [txn.transactional_id])


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_type_reaches_the_stored_batches(kafka_broker, unique_name, codec):
    topic, tid = unique_name(f"arrow-{codec}"), unique_name("arrow-tid")
    create_topic(kafka_broker.bootstrap, topic, partitions=3)
    n = 3000
    keys = [f"key-{i}" for i in range(n)]
    values = pa.array([f"value {i % 10} " * 30 for i in range(n)], pa.string())  # compressible
    with _admin(kafka_broker.bootstrap) as admin:
        txn = _transaction(admin, tid, topic, {"compression.type": codec, "batch.size": 50_000})
        txn.write_columns(pa.array(keys), values)
        _commit(admin, txn)
        batches = stored_batches(admin, topic, 3)
    assert sum(b.record_count for b in batches) == n
    assert {b.attributes & 0x07 for b in batches} == {CODECS[codec].attribute}
    uncompressed = sum(len(k) + len(v) for k, v in zip(keys, values.to_pylist(), strict=True))
    assert sum(b.size for b in batches) < uncompressed / 4
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), keys)


def test_message_max_bytes_cuts_batches_and_requests_and_names_a_record_too_large(kafka_broker, unique_name):
    topic, tid = unique_name("arrow-maxreq"), unique_name("arrow-tid")
    create_topic(kafka_broker.bootstrap, topic, partitions=4)
    limit = 20_000
    keys = [f"k{i}" for i in range(2000)]
    with _admin(kafka_broker.bootstrap) as admin:
        txn = _transaction(admin, tid, topic, {"message.max.bytes": limit})
        txn.write_columns(pa.array(keys), pa.array([b"x" * 100] * len(keys)))
        txn.flush()
        # A record that cannot fit one request is refused by its key, before it is buffered.
        with pytest.raises(UsageError, match=r"record with key 'too-big'.*message.max.bytes.*20000"):
            txn.write_columns(pa.array(["k-ok", "too-big"]), pa.array([b"y", b"z" * limit]))
        # one wave holds a batch per partition (4 x ~19 kB): spread over requests within the limit
        assert limit // 2 < txn.stats.largest_request_bytes <= limit
        assert txn.stats.produce_requests > txn.stats.batches // 2
        _commit(admin, txn)
        batches = stored_batches(admin, topic, 4)
    assert all(b.size <= limit for b in batches)
    assert max(b.size for b in batches) > limit // 2  # filled, not cut needlessly small
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), keys)


def test_batch_num_messages_linger_and_buffer_messages(kafka_broker, unique_name):
    topic = unique_name("arrow-batching")
    create_topic(kafka_broker.bootstrap, topic, partitions=2)
    keys = [f"k{i}" for i in range(1000)]
    column, values = pa.array(keys), pa.array([b"v"] * len(keys))
    with _admin(kafka_broker.bootstrap) as admin:
        held = _transaction(admin, unique_name("tid"), topic, {"batch.num.messages": 70})
        held.write_columns(column.slice(0, 500), values.slice(0, 500))
        assert held.stats.batches == 0  # no linger.ms: rows wait for a full buffer or the end
        _commit(admin, held)
        lingering = _transaction(admin, unique_name("tid"), topic, {"linger.ms": 0})
        lingering.write_columns(column.slice(500, 250), values.slice(500, 250))
        assert lingering.stats.records == 250  # linger.ms=0: sent as soon as they arrived
        _commit(admin, lingering)
        counted = _transaction(admin, unique_name("tid"), topic, {"queue.buffering.max.messages": 200})
        counted.write_columns(column.slice(750, 150), values.slice(750, 150))
        assert counted.stats.records == 0
        counted.write_columns(column.slice(900, 100), values.slice(900, 100))
        assert counted.stats.records == 250 and counted.stats.batches > 0  # 250 >= 200 held: sent
        _commit(admin, counted)
        batches = stored_batches(admin, topic, 2)
    held_batches = [b for b in batches if b.producer_id == held.producer_id]
    assert max(b.record_count for b in held_batches) == 70 and len(held_batches) >= 500 // 70
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), keys)


def test_allow_auto_create_topics_false_does_not_create_the_topic(kafka_broker, unique_name):
    topic = unique_name("arrow-absent")
    with _admin(kafka_broker.bootstrap) as admin:
        with pytest.raises(KafkaEosError, match=f"topic {topic} has no usable metadata"):
            _transaction(admin, unique_name("tid"), topic,
                         {"allow.auto.create.topics": "false", "delivery.timeout.ms": 1500})
        assert topic not in admin.wire.admin.list_topics()


def test_null_keys_fill_a_batch_then_move_to_the_next_partition(kafka_broker, unique_name):
    topic, tid = unique_name("arrow-sticky"), unique_name("arrow-tid")
    create_topic(kafka_broker.bootstrap, topic, partitions=5)
    n = 1000
    values = pa.array([f"null-keyed-{i:05d}" for i in range(n)])  # 16 bytes + 12 of framing each
    with _admin(kafka_broker.bootstrap) as admin:
        txn = _transaction(admin, tid, topic, {"batch.size": 2800})  # 100 records per batch
        for start in range(0, n, 300):  # Arrow batches that do not line up with record batches
            txn.write_columns(None, values.slice(start, 300))
        _commit(admin, txn)
        batches = placed_batches(admin, topic, 5)
    # ten full batches, two per partition: a batch's worth on one partition, then the next one
    assert sorted(b.record_count for _, b in batches) == [100] * 10
    assert sorted(p for p, _ in batches) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    counts = count_keys(kafka_broker.bootstrap, topic)
    assert counts == {b"": n}  # count_keys files null keys under b""


def test_batches_fit_the_topics_max_message_bytes(kafka_broker, unique_name):
    """The producer reads the topic's max.message.bytes (DescribeConfigs) and cuts its batches to
    fit; a record that cannot fit is refused by its key before it is buffered. Where the principal
    may not read the topic's configs, batches the broker refuses are split:
    test_arrow_too_large.py."""
    if kafka_broker.embedded:
        pytest.skip("needs a broker that enforces a topic's max.message.bytes; the embedded broker does not "
                    "(docs/embedded-broker-fidelity.md row 15)")
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = unique_name("arrow-small-topic")
    admin_client = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    new = NewTopic(topic, 1, 1, config={"max.message.bytes": "5000"})
    admin_client.create_topics([new])[topic].result(30)
    del admin_client
    keys = [f"k{i}" for i in range(100)]
    column, values = pa.array(keys), pa.array([b"v" * 200] * len(keys))
    with _admin(kafka_broker.bootstrap) as admin:
        fitting = _transaction(admin, unique_name("tid"), topic, {})  # batch.size 1,000,000 by default
        with pytest.raises(UsageError, match=r"key 'huge'.*max.message.bytes = 5000"):
            fitting.write_columns(pa.array(["huge"]), pa.array([b"h" * 6000]))
        fitting.write_columns(column, values)
        _commit(admin, fitting)
        sizes = [b.size for b in stored_batches(admin, topic, 1)]
        assert len(sizes) > 1 and max(sizes) <= 5000
        assert fitting.stats.refused_too_large == 0  # cut to fit from the start: none refused
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), keys)
