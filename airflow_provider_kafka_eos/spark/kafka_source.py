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

Spark's own data-loss error (``KAFKA_DATA_LOSS``: the range fell out of retention, or its topic
or partition was deleted, after the plan) is translated by :func:`input_loss_translated` into the
provider's ``InputRangeLostError`` naming the planned range, as planning names a range it finds
gone (runbook ``lost-input-ranges``).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.kafka_input import KafkaInput, PartitionRange
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import (
    ConfigError,
    InputRangeLostError,
    KafkaEosError,
    UsageError,
)

__all__ = ["data_loss_error", "decode_input", "input_loss_translated", "read_input_range", "source_options",
           "split_input"]

# What Spark's Kafka source says when a range it must read is gone (failOnDataLoss=true): the error
# class (Spark 3.4+), and the older texts (Spark 3.x: IllegalStateException "Cannot fetch offset").
_DATA_LOSS_MARKERS = ("KAFKA_DATA_LOSS", "Some data may have been lost", "Cannot fetch offset")
# Spark 3.4+/4.x: "Could not read records in offset [S, E) for topic partition T-P with consumer group G"
_RANGE = re.compile(r"offset \[(\d+), (\d+)\) for topic partition (\S+)-(\d+)\b")
# Spark 3.x: "Cannot fetch offset S (GroupId: G, TopicPartition: T-P)"
_FETCH = re.compile(r"Cannot fetch offset (\d+) \(GroupId: [^,]*, TopicPartition: (\S+)-(\d+)\)")
# "Starting offset for T-P was S but consumer reset to F"
_RESET = re.compile(r"Starting offset for (\S+)-(\d+) was (\d+) but consumer reset to (\d+)")

# librdkafka key -> the Java consumer key the Spark source takes (prefixed with "kafka.").
_TRANSLATED = {
    "bootstrap.servers": "bootstrap.servers",
    "security.protocol": "security.protocol",
    "client.id": "client.id",
    "request.timeout.ms": "request.timeout.ms",
    "ssl.endpoint.identification.algorithm": "ssl.endpoint.identification.algorithm",
}
# Records per poll of the source's Java consumer. Spark's consumer polls once per fetched batch and
# hands the records to the task one by one; the Java default (500) makes a 2,000,000-record read
# poll 4,000 times. 10,000 halved the read of 2,000,000 records of 100 B on a 2-core machine
# (3.3 s -> 2.1 s, docs/benchmarks.md "kafka_input"). Memory is unchanged: a poll returns records
# already fetched, and the fetch sizes (max.partition.fetch.bytes, fetch.max.bytes) bound those.
MAX_POLL_RECORDS = 10_000
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
        .option("kafka.max.poll.records", str(MAX_POLL_RECORDS))
    )
    for key, value in source_options(config).items():
        reader = reader.option(key, value)
    return reader.load()


def decode_input(df: Any, decoders: dict[str, Any], *, mark: bool = False) -> Any:
    """The input DataFrame with its ``key`` / ``value`` decoded into columns (``kafka/registry/decoder.py``:
    ``decoders`` maps the part to its decoder); the other columns (topic, partition, offset, ...) as
    they are. Decoding runs in the tasks, batch by batch; a poison record fails its task by name."""
    if not decoders:
        return df
    from pyspark.sql.pandas.types import from_arrow_type

    from airflow_provider_kafka_eos.spark.record_formats import check_importable

    formats = [decoder.format.value for decoder in decoders.values()]
    check_importable(formats, where="the driver's Python")
    from pyspark.sql.types import StructField, StructType

    schema = StructType([StructField(f.name, from_arrow_type(decoders[f.name].arrow_type), True)
                         if f.name in decoders else f for f in df.schema.fields])
    if mark:  # the dead-letter policy: each row's cause (null: decoded) and its raw key/value
        from pyspark.sql.types import BinaryType, StringType

        schema = StructType([*schema.fields, StructField("_kafka_eos_poison", StringType(), True),
                             StructField("_kafka_eos_raw_key", BinaryType(), True),
                             StructField("_kafka_eos_raw_value", BinaryType(), True)])

    def decode(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from airflow_provider_kafka_eos.spark.record_formats import check_importable, requirements_where

        # fastavro (protobuf, jsonschema) missing on an executor: one line naming the fix, found by the
        # driver in Spark's text
        check_importable(formats, where=requirements_where(), marked=True)
        for batch in batches:
            columns = _decoded_columns(batch, decoders, mark=mark)
            yield pa.RecordBatch.from_arrays(list(columns.values()), names=list(columns))

    return df.mapInArrow(decode, schema)


def _decoded_columns(batch: Any, decoders: dict[str, Any], *, mark: bool) -> dict[str, Any]:
    """One Arrow batch of the Kafka source decoded (``mark``: poison rows kept, null, with their cause
    and raw key/value beside; else a poison record raises ``PoisonRecordError``)."""
    import pyarrow as pa

    columns = dict(zip(batch.schema.names, batch.columns, strict=True))
    raw = {"_kafka_eos_raw_key": columns["key"], "_kafka_eos_raw_value": columns["value"]}
    causes: list[str | None] = [None] * batch.num_rows
    for part, decoder in decoders.items():
        if not mark:
            columns[part] = decoder.decode(columns[part], columns["topic"], columns["partition"],
                                           columns["offset"])
            continue
        columns[part], found = decoder.decode_marking(columns[part])
        causes = [c or (f"its {part} cannot be decoded: {f}" if f else None)
                  for c, f in zip(causes, found, strict=True)]
    if mark:
        columns = {**columns, "_kafka_eos_poison": pa.array(causes, pa.string()), **raw}
    return columns


def split_input(df: Any, decoders: dict[str, Any]) -> tuple[Any, Any]:
    """The ``dead-letter`` policy: (the input with its key/value decoded, poison records left out;
    the poison records raw, as ``key``, ``value`` and ``headers`` naming their topic, partition,
    offset and cause, for the dead-letter topic). Both read the same planned range."""
    from pyspark.sql import functions as F

    marked = decode_input(df, decoders, mark=True)
    good = marked.where(F.col("_kafka_eos_poison").isNull()).drop("_kafka_eos_poison", "_kafka_eos_raw_key",
                                                                   "_kafka_eos_raw_value")
    header = F.struct  # {key: string, value: binary}, the writer's headers shape
    poison = marked.where(F.col("_kafka_eos_poison").isNotNull()).select(
        F.col("_kafka_eos_raw_key").alias("key"), F.col("_kafka_eos_raw_value").alias("value"),
        F.array(*[header(F.lit(f"kafka_eos.{name}").alias("key"), F.col(column).cast("string").cast("binary")
                         .alias("value"))
                  for name, column in (("topic", "topic"), ("partition", "partition"), ("offset", "offset"),
                                       ("cause", "_kafka_eos_poison"))]).alias("headers"))
    return good, poison


def data_loss_error(error: BaseException | str, kafka_input: KafkaInput, *, pipeline_id: str,
                    checkpoint_id: int, base_uri: str) -> InputRangeLostError | None:
    """Spark's data-loss error as ``InputRangeLostError`` naming the planned range(s); None for any other.

    The partition and offsets Spark names are matched to the plan; a text naming no partition of
    the plan still is a data loss of this checkpoint's input, reported with every planned range.
    Nothing is changed: a retry of the checkpoint reads its stored plan and fails the same way, so
    the error names the plan and claim objects to remove before a new checkpoint (runbook).
    """
    from airflow_provider_kafka_eos.kafka.checkpoints.input_ranges import basis_uri, plan_uri

    text = str(error)
    if not any(marker in text for marker in _DATA_LOSS_MARKERS):
        return None
    found: list[str] = []
    for match in _RANGE.finditer(text):
        found.append(_lost(kafka_input, match.group(3), int(match.group(4)),
                           f"offsets [{match.group(1)}, {match.group(2)}) could not be read"))
    for match in _FETCH.finditer(text):
        found.append(_lost(kafka_input, match.group(2), int(match.group(3)),
                           f"offset {match.group(1)} could not be fetched"))
    for match in _RESET.finditer(text):
        found.append(_lost(kafka_input, match.group(1), int(match.group(2)),
                           f"the log starts at {match.group(4)} now, after the planned {match.group(3)}"))
    lost = sorted(set(filter(None, found)))
    if not lost:
        lost = [f"{r}" for r in kafka_input.ranges if not r.empty]
        lost = [f"one of {', '.join(lost)} (Spark's error names no planned partition: "
                f"{_first_line(text)})"]
    return InputRangeLostError(
        f"checkpoint {checkpoint_id} of {pipeline_id}: input Kafka no longer has part of the planned range "
        f"{'; '.join(lost)}: retention (or DeleteRecords, or deleting the topic) removed it after the "
        "checkpoint planned it, and Spark's Kafka source (failOnDataLoss=true) stopped instead of skipping "
        "it. Nothing was committed: this attempt wrote no manifest, and its open transactions are aborted "
        "by the next run's restore. A retry of this checkpoint reads the same stored plan and fails again. "
        f"The records cannot be read any more; to go on without them, delete this checkpoint's plan "
        f"{plan_uri(base_uri, pipeline_id, checkpoint_id)} and its claim "
        f"{basis_uri(base_uri, pipeline_id, kafka_input.based_on)}, then run a new checkpoint with "
        "skip_lost_input_ranges=True: its planning names the lost range and records it as skipped")


@contextlib.contextmanager
def input_loss_translated(kafka_input: KafkaInput, *, pipeline_id: str, checkpoint_id: int,
                          base_uri: str) -> Iterator[None]:
    """Around the user's callable and the write: Spark's data-loss error becomes ``InputRangeLostError``."""
    try:
        yield
    except KafkaEosError:
        raise
    except Exception as exc:
        lost = data_loss_error(exc, kafka_input, pipeline_id=pipeline_id, checkpoint_id=checkpoint_id,
                               base_uri=base_uri)
        if lost is None:
            raise
        raise lost from None


def _lost(kafka_input: KafkaInput, topic: str, partition: int, what: str) -> str | None:
    planned: PartitionRange | None = kafka_input.range_of(topic, partition)
    if planned is None:
        return None
    return f"{planned}: {what}"


def _first_line(text: str) -> str:
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return line[:300]
