"""Read a checkpoint's Kafka input range with Spark's own Kafka source, exactly that range.

The range is fixed before anything is read (``kafka/checkpoints/input_ranges.py``); here it becomes
a batch read of ``spark-sql-kafka-0-10`` (the connector of the running Spark version: spark-submit
``--packages org.apache.spark:spark-sql-kafka-0-10_<scala>:<spark version>``, or its jars on
``spark.jars``) with ``assign`` = the planned partitions, ``startingOffsets`` / ``endingOffsets`` =
the range as JSON, ``kafka.isolation.level=read_committed`` (aborted input never reaches the
user's callable; ``to`` is a last stable offset, so nothing past it is pending) and
``failOnDataLoss=true`` (a range retention removed between planning and reading fails the job,
never silently shrinks it).

The connection's settings that decide how to reach the cluster are translated to the Java
client's keys or refused by name; producer settings (linger, compression, ...) are the writer's.
"""

from __future__ import annotations

import json
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.kafka_input import KafkaInput
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import ConfigError, UsageError

__all__ = ["read_input_range", "source_options"]

# librdkafka key -> the Java consumer key the Spark source takes (prefixed with "kafka.").
_TRANSLATED = {
    "bootstrap.servers": "bootstrap.servers",
    "security.protocol": "security.protocol",
    "client.id": "client.id",
    "request.timeout.ms": "request.timeout.ms",
    "ssl.endpoint.identification.algorithm": "ssl.endpoint.identification.algorithm",
}
# Keys about reaching the cluster that the source cannot honour yet: refused, never dropped.
_CONNECTION_PREFIXES = ("ssl.", "sasl.", "security.", "enable.ssl")


def source_options(config: KafkaClientConfig) -> dict[str, str]:
    """The ``kafka.*`` options of Spark's Kafka source for this connection (no secrets: refused)."""
    settings = config.confluent()
    options: dict[str, str] = {}
    for key, value in sorted(settings.items()):
        if key in _TRANSLATED:
            options[f"kafka.{_TRANSLATED[key]}"] = str(value)
        elif key == "ssl.ca.location":
            options["kafka.ssl.truststore.type"] = "PEM"
            options["kafka.ssl.truststore.location"] = str(value)
        elif key.startswith(_CONNECTION_PREFIXES):
            raise ConfigError(
                f"{config.source}: key {key!r} cannot be passed to Spark's Kafka source for the pipeline's "
                "input yet (the input reader supports PLAINTEXT and SSL with a CA file); read this input "
                "with a connection without it, or leave input_topics unset")
    protocol = options.get("kafka.security.protocol", "PLAINTEXT").upper()
    if protocol not in ("PLAINTEXT", "SSL"):
        raise ConfigError(f"{config.source}: security.protocol={protocol} is not supported for the "
                          f"pipeline's "
                          "Kafka input yet (PLAINTEXT or SSL)")
    return options


def read_input_range(spark: Any, kafka_input: KafkaInput, config: KafkaClientConfig) -> Any:
    """The input DataFrame (Spark's Kafka source schema: key, value, topic, partition, offset, ...)."""
    if not kafka_input.ranges:
        raise UsageError(f"the input plan names no partition of {', '.join(kafka_input.topics)}; "
                         f"nothing to read")
    assign: dict[str, list[int]] = {}
    for r in kafka_input.ranges:
        assign.setdefault(r.topic, []).append(r.partition)
    starting, ending = kafka_input.spark_offsets()
    reader = (
        spark.read.format("kafka")
        .option("assign", json.dumps(assign, sort_keys=True))
        .option("startingOffsets", starting)
        .option("endingOffsets", ending)
        .option("failOnDataLoss", "true")
        .option("kafka.isolation.level", "read_committed")
    )
    for key, value in source_options(config).items():
        reader = reader.option(key, value)
    return reader.load()
