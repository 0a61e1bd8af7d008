"""Producer settings through ``write_exactly_once``: honoured end to end, or refused before anything.

A compressed checkpoint (the connection's ``compression.type``) written by Spark tasks on both
producer paths, committed, read back raw (every stored batch carries the codec) and by a
read_committed consumer (every key exactly once). A refused key stops the write on the driver
before any connection, transaction or manifest.
"""

from __future__ import annotations

import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import ConfigError
from airflow_provider_kafka_eos.kafka.producers.compression import CODECS
from airflow_provider_kafka_eos.spark.writer import write_exactly_once
from kafka_eos_testing.broker.txn_testkit import create_topic
from kafka_eos_testing.spark import commit_manifest
from kafka_eos_testing.stored_batches import stored_batches
from kafka_eos_testing.transactions import wait_until_committed
from kafka_eos_testing.verify import assert_exactly_once, count_keys


@pytest.mark.spark
@pytest.mark.broker
@pytest.mark.parametrize("producer", ["arrow", "librdkafka"])
def test_a_compressed_checkpoint_end_to_end(spark, kafka_broker, tmp_path, unique_name, producer):
    topic, prefix = unique_name("zstd-out"), unique_name("zstd-pipe")
    create_topic(kafka_broker.bootstrap, topic, partitions=3)
    n = 20_000
    rows = [(f"key-{i}", f"event {i % 17} of a very repetitive stream " * 4) for i in range(n)]
    df = spark.createDataFrame(rows, "key string, value string").repartition(4)
    config = {**kafka_broker.client_config(), "compression.type": "zstd", "compression.level": 6}

    manifest = write_exactly_once(df, topic=topic, kafka_config=config, transactional_id_prefix=prefix,
                                  checkpoint_id=1, manifest_base_uri=str(tmp_path), producer=producer)
    assert {o.outcome for o in commit_manifest(kafka_broker.client_config(), manifest)} == {"committed"}
    admin_config = KafkaClientConfig.from_mapping(kafka_broker.client_config())
    with TransactionAdmin(admin_config) as admin:
        wait_until_committed(admin, [c.transactional_id for c in manifest.committables])
        batches = stored_batches(admin, topic, 3)
    assert sum(b.record_count for b in batches) == n
    assert {b.attributes & 0x07 for b in batches} == {CODECS["zstd"].attribute}
    stored = sum(b.size for b in batches)
    raw = sum(len(k) + len(v) for k, v in rows)
    assert stored < raw / 5, (stored, raw)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [k for k, _ in rows])


@pytest.mark.parametrize("producer", ["arrow", "librdkafka"])
@pytest.mark.parametrize(
    ("key", "value"), [("acks", "1"), ("enable.idempotence", "false"), ("compression.type", "brotli")]
)
def test_a_refused_key_stops_the_write_before_anything(tmp_path, producer, key, value):
    """No Spark and no broker needed: the refusal comes first (an unreachable bootstrap proves no
    connection was tried, an empty store that no manifest was written)."""
    with pytest.raises(ConfigError) as info:
        write_exactly_once(None, topic="t", kafka_config={"bootstrap.servers": "127.0.0.1:1", key: value},
                           transactional_id_prefix="p", checkpoint_id=1, manifest_base_uri=str(tmp_path),
                           producer=producer)
    assert f"'{key}'" in str(info.value) and f"producer path '{producer}'" in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_a_partitioner_the_arrow_producer_cannot_follow_is_refused_there_only(tmp_path):
    config = {"bootstrap.servers": "127.0.0.1:1", "partitioner": "consistent_random"}
    with pytest.raises(ConfigError, match=r"'partitioner'.*producer='librdkafka'"):
        write_exactly_once(None, topic="t", kafka_config=config, transactional_id_prefix="p",
                           checkpoint_id=1, manifest_base_uri=str(tmp_path))
    assert list(tmp_path.iterdir()) == []
