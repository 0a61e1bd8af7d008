"""The two producer paths write the same records: what a consumer sees, record by record.

The same DataFrame (keys, values, headers, a CreateTime column) is written by the Arrow producer
and by librdkafka into two topics of the same partition count, committed, and read back by a
read_committed kafka-python consumer: key, value, headers, timestamp, timestamp type and
partition must be equal for every record. On a topic with ``message.timestamp.type=LogAppendTime``
(real Kafka only: the embedded broker keeps CreateTime, docs/embedded-broker-fidelity.md) both
paths' records carry the broker's append time instead.
"""

from __future__ import annotations

import datetime as dt
import time

import pytest
from kafka import KafkaConsumer, TopicPartition

from airflow_provider_kafka_eos.spark.writer import write_exactly_once
from kafka_eos_testing.spark import commit_manifest
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.spark, pytest.mark.broker]

PARTITIONS = 4
N = 300
SCHEMA = "key string, value string, headers array<struct<key:string,value:binary>>, ts timestamp"
BASE = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)


def _rows() -> list[tuple]:
    return [
        (f"key-{i}", None if i % 50 == 7 else f"value-{i}",
         [("trace", f"t-{i}".encode()), ("empty", b""), ("null", None)][: i % 4] or None,
         BASE + dt.timedelta(milliseconds=37 * i))
        for i in range(N)
    ]


def _create(bootstrap: str, topic: str, **config: str) -> None:
    """A topic that keeps its records: ``BASE`` lies further back than the broker's default
    retention (7 days), and real Kafka deletes a rolled segment whose newest CreateTime is older
    than that, whenever its retention check runs (the landing CI of 2026-11-28 read 0 records)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"retention.ms": "-1", **config}
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config=config)])[topic].result(30)


def _write(spark, broker, tmp_path, topic: str, prefix: str, producer: str) -> None:
    df = spark.createDataFrame(_rows(), SCHEMA).repartition(3)
    manifest = write_exactly_once(df, topic=topic, kafka_config=broker.client_config(),
                                  transactional_id_prefix=prefix, checkpoint_id=1,
                                  manifest_base_uri=str(tmp_path / producer), headers_col="headers",
                                  timestamp_col="ts", producer=producer)
    assert {o.outcome for o in commit_manifest(broker.client_config(), manifest)} == {"committed"}


def _seen(bootstrap: str, topic: str) -> dict[bytes, tuple]:
    """Every record as a consumer sees it, by key (stops at N records or 5 s without one)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        seen = {}
        for r in consumer:
            assert r.key not in seen, r.key
            seen[r.key] = (r.value, list(r.headers), r.timestamp, r.timestamp_type, r.partition)
            if len(seen) == N:
                break
        return seen
    finally:
        consumer.close()


def test_both_paths_write_equal_records(spark, kafka_broker, tmp_path, unique_name):
    topics = {p: unique_name(f"equal-{p}") for p in ("arrow", "librdkafka")}
    for producer, topic in topics.items():
        _create(kafka_broker.bootstrap, topic)
        _write(spark, kafka_broker, tmp_path, topic, unique_name(f"eq-{producer}"), producer)
    arrow, librdkafka = (_seen(kafka_broker.bootstrap, topics[p]) for p in ("arrow", "librdkafka"))
    assert len(arrow) == len(librdkafka) == N
    for i, (key, value, headers, stamp) in enumerate(_rows()):
        want_headers = [(k, v) for k, v in headers or []]
        want = (value and value.encode(), want_headers, int(stamp.timestamp() * 1000), 0)
        assert arrow[key.encode()][:4] == want, (i, arrow[key.encode()])
        assert arrow[key.encode()] == librdkafka[key.encode()], (i, arrow[key.encode()])
    for topic in topics.values():
        assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [r[0] for r in _rows()])


def test_both_paths_carry_log_append_time_on_such_a_topic(spark, kafka_broker, tmp_path, unique_name):
    if kafka_broker.embedded:
        pytest.skip("needs message.timestamp.type=LogAppendTime; the embedded broker keeps CreateTime "
                    "(docs/embedded-broker-fidelity.md row 16)")
    started_ms = int(time.time() * 1000)
    for producer in ("arrow", "librdkafka"):
        topic = unique_name(f"append-{producer}")
        _create(kafka_broker.bootstrap, topic, **{"message.timestamp.type": "LogAppendTime"})
        _write(spark, kafka_broker, tmp_path, topic, unique_name(f"ap-{producer}"), producer)
        seen = _seen(kafka_broker.bootstrap, topic)
        assert len(seen) == N
        assert {s[3] for s in seen.values()} == {1}  # LogAppendTime
        assert all(started_ms - 1000 <= s[2] <= int(time.time() * 1000) + 1000 for s in seen.values())
        assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [r[0] for r in _rows()])
