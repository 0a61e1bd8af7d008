"""A Kafka-input pipeline on Avro: the input's values (framed by confluent-kafka's AvroSerializer
against the real registry) decoded into columns by ``decode_input``, written as Avro exactly once;
a poison record fails the run by topic/partition/offset with nothing prepared or committed.

The input DataFrame has the shape of Spark's Kafka source (key, value, topic, partition, offset),
built here from the records: Spark's Kafka connector needs jars on the session's classpath, which
the session-wide ``spark`` fixture does not carry (the connector's reading is covered by the
Kafka-input passes under spark-submit); the decoding, the write and the refusal are the provider's.
"""

from __future__ import annotations

import contextlib
import json

import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import find_manifests
from airflow_provider_kafka_eos.kafka.errors import PoisonRecordError
from airflow_provider_kafka_eos.kafka.registry.config import RecordFormats, RegistryConfig, SerdeSetting
from airflow_provider_kafka_eos.kafka.registry.decoder import AvroDecoder
from airflow_provider_kafka_eos.spark.kafka_source import decode_input, split_input
from airflow_provider_kafka_eos.spark.writer import write_exactly_once
from kafka_eos_testing.spark import commit_manifest
from kafka_eos_testing.verify import committed_messages, count_keys

pytest.importorskip("confluent_kafka.schema_registry.avro")
pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.provider_logic]

ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "long"}, {"name": "customer", "type": "string"}]}


def _input(spark, registry_url: str, topic: str, n: int, poison_at: int | None = None):
    """``n`` framed Avro records over 3 partitions; record ``poison_at`` replaced by plain bytes."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

    serialize = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(ORDER))
    context = SerializationContext(topic, MessageField.VALUE)
    rows = [(f"o-{i}".encode(), b"not avro" if i == poison_at else serialize({"id": i, "customer": f"c{i}"},
                                                                            context), topic, i % 3, i // 3)
            for i in range(n)]
    schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                         StructField("topic", StringType()), StructField("partition", IntegerType()),
                         StructField("offset", LongType())])
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, 3), schema)


def _pipeline(spark, kafka_broker, schema_registry, tmp_path, prefix, out_topic, in_topic, n, poison_at=None,
              dead_letter_topic=None):
    registry = RegistryConfig(schema_registry.url)
    decoders = {"value": AvroDecoder(SerdeSetting(format="avro", schema=json.dumps(ORDER)), registry)}
    read = _input(spark, schema_registry.url, in_topic, n, poison_at)
    dead_letters = None
    if dead_letter_topic is None:
        decoded = decode_input(read, decoders)
    else:  # what the job does under on_poison='dead-letter'
        decoded, poison = split_input(read, decoders)
        dead_letters = (poison, dead_letter_topic)
    out = decoded.selectExpr("key", "named_struct('id', value.id * 10, 'customer', value.customer) as value")
    formats = RecordFormats(value=SerdeSetting(format="avro", schema=json.dumps(ORDER), auto_register=True),
                            registry=registry)
    return write_exactly_once(out, topic=out_topic, kafka_config=kafka_broker.client_config(),
                              transactional_id_prefix=prefix, checkpoint_id=1,
                              manifest_base_uri=str(tmp_path), record_formats=formats,
                              dead_letters=dead_letters)


def test_avro_input_is_decoded_and_written_as_avro_exactly_once(spark, kafka_broker, schema_registry,
                                                                 tmp_path, unique_name):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    prefix, out_topic, in_topic = unique_name("dec"), unique_name("out"), unique_name("in")
    manifest = _pipeline(spark, kafka_broker, schema_registry, tmp_path, prefix, out_topic, in_topic, 60)
    commit_manifest(kafka_broker.bootstrap, manifest)
    counts = count_keys(kafka_broker.bootstrap, out_topic)
    assert counts == {f"o-{i}".encode(): 1 for i in range(60)}  # read_committed: every key once
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": schema_registry.url}))
    context = SerializationContext(out_topic, MessageField.VALUE)
    values = [deserialize(v, context) for v in _committed_values(kafka_broker.bootstrap, out_topic)]
    assert sorted(values, key=lambda r: r["id"]) == [{"id": i * 10, "customer": f"c{i}"} for i in range(60)]


def test_a_poison_record_fails_the_run_by_name_with_nothing_committed(spark, kafka_broker, schema_registry,
                                                                      tmp_path, unique_name):
    prefix, out_topic, in_topic = unique_name("poison"), unique_name("out"), unique_name("in")
    with pytest.raises(PoisonRecordError) as err:
        _pipeline(spark, kafka_broker, schema_registry, tmp_path, prefix, out_topic, in_topic, 30,
                  poison_at=22)
    where = f"input record at topic '{in_topic}' partition 1 offset 7: its value cannot be decoded"
    assert where in str(err.value)
    assert "not in the Confluent wire format" in str(err.value)
    assert find_manifests(str(tmp_path), prefix) == []  # no vote: nothing can be committed
    with contextlib.suppress(LookupError):  # LookupError: no task reached its produce
        assert count_keys(kafka_broker.bootstrap, out_topic, timeout_s=5) == {}


def test_a_poison_record_goes_to_the_dead_letter_topic_in_the_same_checkpoint(
        spark, kafka_broker, schema_registry, tmp_path, unique_name):
    prefix, out_topic, in_topic, dlq = (unique_name(n) for n in ("dlq", "out", "in", "dead"))
    manifest = _pipeline(spark, kafka_broker, schema_registry, tmp_path, prefix, out_topic, in_topic, 30,
                         poison_at=22, dead_letter_topic=dlq)
    topics = {p.topic for c in manifest.committables for p in c.partitions}
    assert topics == {out_topic, dlq}  # one vote lists both: they commit together or not at all
    commit_manifest(kafka_broker.bootstrap, manifest)
    expected = {f"o-{i}".encode(): 1 for i in range(30) if i != 22}
    assert count_keys(kafka_broker.bootstrap, out_topic) == expected  # read_committed: every key once
    assert count_keys(kafka_broker.bootstrap, dlq) == {b"o-22": 1}  # read_committed: once
    [(value, headers)] = _committed_values(kafka_broker.bootstrap, dlq, with_headers=True)
    assert value == b"not avro"  # the raw record, as it was read
    named = {k: v.decode() for k, v in headers}
    assert (named["kafka_eos.topic"], named["kafka_eos.partition"], named["kafka_eos.offset"]) == (
        in_topic, "1", "7")
    assert "its value cannot be decoded: it is not in the Confluent wire format" in named["kafka_eos.cause"]


def _committed_values(bootstrap: str, topic: str, *, with_headers: bool = False) -> list:
    """The values (and headers) a read_committed consumer sees in ``topic``."""
    return [(m.value(), m.headers()) if with_headers else m.value()
            for m in committed_messages(bootstrap, topic)]
