"""Round trips through the embedded broker with unmodified clients (confluent-kafka, kafka-python)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_eos_testing.verify import assert_exactly_once, count_keys, exactly_once_report

pytestmark = [pytest.mark.broker, pytest.mark.broker_double]


def _produce(bootstrap: str, topic: str, keys: list[bytes], **config) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    errors = []
    for key in keys:
        producer.produce(
            topic,
            key=key,
            value=b"v-" + key,
            on_delivery=lambda err, _msg: errors.append(err) if err else None,
        )
    assert producer.flush(30) == 0
    assert errors == []


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    futures[topic].result(timeout=30)


def test_confluent_kafka_round_trip_over_several_partitions(kafka_broker, unique_name):
    topic = unique_name("roundtrip")
    _create_topic(kafka_broker.bootstrap, topic, 3)
    keys = [f"key-{i}".encode() for i in range(3000)]
    _produce(kafka_broker.bootstrap, topic, keys)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), keys)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted"), keys)


def test_idempotent_producer_writes_each_key_once(kafka_broker, unique_name):
    topic = unique_name("idempotent")
    keys = [f"key-{i}".encode() for i in range(2000)]
    _produce(
        kafka_broker.bootstrap,
        topic,
        keys,
        **{"enable.idempotence": True, "acks": "all", "max.in.flight.requests.per.connection": 5},
    )
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), keys)


def test_kafka_python_round_trip(kafka_broker, unique_name):
    from kafka import KafkaConsumer, KafkaProducer

    topic = unique_name("kafka-python")
    keys = [f"key-{i}".encode() for i in range(500)]
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, enable_idempotence=True, acks="all")
    for key in keys:
        producer.send(topic, key=key, value=b"x")
    producer.flush(timeout=30)
    producer.close()

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=kafka_broker.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < len(keys) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            seen.extend(record.key for record in records)
    extra = consumer.poll(timeout_ms=500)  # nothing beyond the keys written
    consumer.close()
    assert not any(extra.values())
    assert sorted(seen) == sorted(keys)
    # and the confluent-kafka verifier agrees with kafka-python
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), keys)


def test_count_keys_reports_duplicates_missing_and_unexpected(kafka_broker, unique_name):
    topic = unique_name("report")
    _produce(kafka_broker.bootstrap, topic, [b"a", b"b", b"b", b"zzz"])
    report = exactly_once_report(count_keys(kafka_broker.bootstrap, topic), [b"a", b"b", b"c"])
    assert not report.ok
    assert report.duplicates == {b"b": 2}
    assert report.missing == [b"c"]
    assert report.unexpected == {b"zzz": 1}
    with pytest.raises(AssertionError, match="missing"):
        assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [b"a", b"b", b"c"])


def test_count_keys_refuses_a_topic_that_does_not_exist(kafka_broker, unique_name):
    with pytest.raises(LookupError, match="does not exist"):
        count_keys(kafka_broker.bootstrap, unique_name("never-created"), timeout_s=10)
