"""The connection's producer keys: honoured by the Arrow producer, or refused by key and path.

No broker: these are the rules of ``kafka/producers/producer_config.py`` (the broker tests in
``tests/kafka/producers/test_arrow_producer_settings.py`` show the honoured keys on the wire). The
writer applies them on the driver before anything is written: ``test_writer_refuses_...``
shows a refusal leaves no transaction and no manifest.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from airflow_provider_kafka_eos.kafka.config import _CLIENT_ROLE_KEYS, KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import ConfigError
from airflow_provider_kafka_eos.kafka.producers.compression import Codec
from airflow_provider_kafka_eos.kafka.producers.librdkafka import producer_settings
from airflow_provider_kafka_eos.kafka.producers.producer_config import (
    PRODUCER_KEYS,
    ArrowProducerSettings,
    arrow_producer_settings,
    check_producer_settings,
)

DOCS = Path(__file__).resolve().parents[3] / "docs" / "configuration" / "producer-settings.md"


def test_every_producer_key_is_translated_for_the_arrow_producer() -> None:
    got = arrow_producer_settings({
        "bootstrap.servers": "b:9092", "compression.type": "zstd", "compression.level": 7,
        "batch.size": "65536", "batch.num.messages": 500, "linger.ms": 50,
        "queue.buffering.max.kbytes": 2048, "queue.buffering.max.messages": 10000,
        "message.max.bytes": 2_000_000, "acks": "all", "enable.idempotence": "true",
        "delivery.timeout.ms": 90_000, "request.timeout.ms": 20_000, "retries": 7,
        "max.in.flight.requests.per.connection": 5, "partitioner": "murmur2_random",
        "allow.auto.create.topics": "false", "client.id": "etl",
    })
    assert got == ArrowProducerSettings(
        codec=Codec("zstd", 7), batch_bytes=65536, batch_records=500, buffer_bytes=2048 * 1024,
        buffer_records=10000, linger_ms=50, max_request_bytes=2_000_000, request_timeout_ms=20_000,
        delivery_timeout_ms=90_000, retries=7, allow_auto_create_topics=False,
    )


def test_aliases_and_defaults() -> None:
    assert arrow_producer_settings({}) == ArrowProducerSettings()
    got = arrow_producer_settings({"compression.codec": "lz4", "queue.buffering.max.ms": 5,
                                   "message.timeout.ms": 1000, "request.required.acks": -1,
                                   "message.send.max.retries": 3})
    assert (got.codec, got.linger_ms, got.delivery_timeout_ms, got.retries) == (Codec("lz4"), 5, 1000, 3)
    # a request limit below the default batch size shrinks the batches to fit
    assert arrow_producer_settings({"message.max.bytes": 100_000}).batch_bytes == 100_000
    # Java's name is accepted and means librdkafka's message.max.bytes
    config = KafkaClientConfig.from_mapping({"bootstrap.servers": "b:1", "max.request.size": 123_456})
    assert config.confluent()["message.max.bytes"] == 123_456


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"acks": "1"}, "acks"),
        ({"request.required.acks": 0}, "request.required.acks"),
        ({"enable.idempotence": False}, "enable.idempotence"),
        ({"transactional.id": "mine"}, "transactional.id"),
        ({"transaction.timeout.ms": 60000}, "transaction.timeout.ms"),
        ({"retries": 0}, "retries"),
        ({"max.in.flight": 6}, "max.in.flight"),
        ({"compression.type": "brotli"}, "compression.type"),
        ({"compression.type": "gzip", "compression.level": 12}, "compression.level"),
        ({"linger.ms": 5, "queue.buffering.max.ms": 10}, "linger.ms"),
    ],
)
def test_refused_on_both_paths_by_key_and_path(settings, key) -> None:
    for path in ("arrow", "librdkafka"):
        with pytest.raises(ConfigError) as info:
            if path == "arrow":
                arrow_producer_settings(settings, source="connection kafka_eos_default")
            else:
                check_producer_settings(settings, path, source="connection kafka_eos_default")
        text = str(info.value)
        assert f"'{key}'" in text and f"producer path '{path}'" in text and "kafka_eos_default" in text


def test_the_librdkafka_producer_refuses_instead_of_overriding() -> None:
    with pytest.raises(ConfigError, match=r"producer path 'librdkafka'\): key 'acks' = 1"):
        producer_settings({"acks": 1}, "t-0-1", 60_000)
    settings = producer_settings({"compression.type": "zstd", "compression.level": 5}, "t-0-1", 60_000)
    assert (settings["compression.type"], settings["compression.level"]) == ("zstd", 5)
    assert settings["acks"] == "all"


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"partitioner": "consistent_random"}, "partitioner"),
        ({"batch.size": 0}, "batch.size"),
        ({"linger.ms": "soon"}, "linger.ms"),
        ({"message.max.bytes": 10}, "message.max.bytes"),
        ({"allow.auto.create.topics": "maybe"}, "allow.auto.create.topics"),
    ],
)
def test_refused_on_the_arrow_path_only(settings, key) -> None:
    with pytest.raises(ConfigError) as info:
        arrow_producer_settings(settings)
    assert f"'{key}'" in str(info.value) and "producer path 'arrow'" in str(info.value)
    if key == "partitioner":
        check_producer_settings(settings, "librdkafka")  # librdkafka honours its own partitioners


def test_keys_that_are_not_producer_keys_are_never_refused() -> None:
    others = {
        "bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "u", "sasl.password": "p", "ssl.ca.location": "/ca.pem", "group.id": "g",
        "auto.offset.reset": "earliest", "isolation.level": "read_committed", "fetch.max.bytes": 1000,
        "session.timeout.ms": 10000, "statistics.interval.ms": 0, "socket.keepalive.enable": True,
        "metadata.max.age.ms": 1000, "client.rack": "r1", "debug": "broker",
    }
    assert arrow_producer_settings(others) == ArrowProducerSettings()
    check_producer_settings(others, "librdkafka")


def test_the_docs_table_lists_every_producer_key() -> None:
    """docs/configuration/producer-settings.md: one row per key of PRODUCER_KEYS, and every producer
    tuning key the connection accepts is in PRODUCER_KEYS (a new key cannot be silently dropped)."""
    rows = {m.group(1) for m in re.finditer(r"^\| `([a-z.]+)`", DOCS.read_text(), re.M)}
    assert set(PRODUCER_KEYS) <= rows, set(PRODUCER_KEYS) - rows
    consumer_or_client = {
        "group.id", "group.instance.id", "auto.offset.reset", "enable.auto.commit", "auto.commit.interval.ms",
        "enable.auto.offset.store", "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms",
        "isolation.level", "fetch.min.bytes", "fetch.max.bytes", "fetch.wait.max.ms",
        "max.partition.fetch.bytes", "partition.assignment.strategy", "queued.min.messages",
        "queued.max.messages.kbytes", "statistics.interval.ms", "api.version.request",
        "topic.metadata.refresh.interval.ms", "socket.keepalive.enable", "socket.nagle.disable",
        "receive.message.max.bytes", "client.rack",
    }
    assert _CLIENT_ROLE_KEYS - consumer_or_client <= set(PRODUCER_KEYS), (
        _CLIENT_ROLE_KEYS - consumer_or_client - set(PRODUCER_KEYS))
