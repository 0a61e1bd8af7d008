"""Kafka-input decoding (``kafka/registry/decoder.py``): records framed by confluent-kafka's own
AvroSerializer against the real registry (Apicurio) decoded into Arrow, resolved to the reader
schema; every kind of poison record named by topic, partition and offset."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from airflow_provider_kafka_eos.kafka.errors import ConfigError, PoisonRecordError
from airflow_provider_kafka_eos.kafka.registry.config import RegistryConfig, SerdeSetting
from airflow_provider_kafka_eos.kafka.registry.decoder import AvroDecoder, arrow_type_of_avro, input_settings

pytest.importorskip("confluent_kafka.schema_registry.avro")

WRITER = {"type": "record", "name": "Order", "namespace": "shop",
          "fields": [{"name": "id", "type": "long"}, {"name": "customer", "type": "string"}]}
# the reader (the pipeline) expects a field the writer does not have yet: resolution fills its default
READER = {**WRITER, "fields": [*WRITER["fields"],
                               {"name": "note", "type": ["null", "string"], "default": None}]}


def _framed(registry_url: str, topic: str, records: list[dict]) -> list[bytes]:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serialize = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(WRITER))
    return [serialize(r, SerializationContext(topic, MessageField.VALUE)) for r in records]


def _decoder(url: str) -> AvroDecoder:
    return AvroDecoder(SerdeSetting(format="avro", schema=json.dumps(READER)), RegistryConfig(url))


def _decode(decoder: AvroDecoder, values: list[bytes | None], topic: str = "orders-in"):
    n = len(values)
    return decoder.decode(pa.array(values, pa.binary()), pa.array([topic] * n), pa.array([1] * n, pa.int32()),
                          pa.array(range(40, 40 + n), pa.int64()))


def test_framed_avro_decodes_to_the_reader_schema(schema_registry, registry_topic):
    values = _framed(schema_registry.url, registry_topic, [{"id": i, "customer": f"c{i}"} for i in range(3)])
    decoder = _decoder(schema_registry.url)
    column = _decode(decoder, [*values, None])
    assert column.to_pylist() == [{"id": i, "customer": f"c{i}", "note": None} for i in range(3)] + [None]
    assert column.type == pa.struct([pa.field("id", pa.int64(), False),
                                     pa.field("customer", pa.string(), False), pa.field("note", pa.string())])


@pytest.mark.parametrize("poison, cause", [
    (b"plain text", "it is not in the Confluent wire format"),
    (b"\x00\x00\x0f\x42\x3f\x02", "schema id 999999 is unknown to schema registry"),
    (None, "it does not decode under the schema"),  # the good record, truncated (below)
])
def test_a_poison_record_is_named_by_topic_partition_and_offset(schema_registry, registry_topic, poison,
                                                                cause):
    [good] = _framed(schema_registry.url, registry_topic, [{"id": 1, "customer": "c1"}])
    poison = poison if poison is not None else good[:6]
    decoder = _decoder(schema_registry.url)
    with pytest.raises(PoisonRecordError) as err:
        _decode(decoder, [good, good, poison])
    message = str(err.value)
    assert "input record at topic 'orders-in' partition 1 offset 42: its value cannot be decoded" in message
    assert cause in message and "nothing of this checkpoint is committed" in message
    assert err.value.runbook == "poison-record"


def test_the_dead_letter_policy_marks_poison_records_instead_of_failing(schema_registry, registry_topic):
    [good] = _framed(schema_registry.url, registry_topic, [{"id": 1, "customer": "c1"}])
    values = pa.array([good, b"junk", None], pa.binary())
    column, causes = _decoder(schema_registry.url).decode_marking(values)
    assert column.to_pylist() == [{"id": 1, "customer": "c1", "note": None}, None, None]
    assert causes[0] is None and causes[2] is None  # decoded, and a tombstone
    assert "not in the Confluent wire format" in causes[1]


def test_the_arrow_type_comes_from_the_reader_schema_and_the_unsupported_is_named():
    nested = {"type": "record", "name": "R", "fields": [
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "inner", "type": {"type": "record", "name": "I", "fields": [{"name": "x", "type": "int"}]}}]}
    arrow, nullable = arrow_type_of_avro(nested)
    assert arrow == pa.struct([pa.field("tags", pa.list_(pa.string()), False),
                               pa.field("inner", pa.struct([pa.field("x", pa.int32(), False)]), False)])
    assert not nullable
    with pytest.raises(ConfigError, match=r"field 'u': union \[\"int\", \"string\"\] is not supported"):
        arrow_type_of_avro({"type": "record", "name": "R",
                            "fields": [{"name": "u", "type": ["int", "string"]}]})


@pytest.mark.parametrize("spec, needle", [
    ({"value": "avro", "on_poison": "skip"}, "the policies are fail, dead-letter"),
    ({"value": "avro", "on_poison": "dead-letter"}, "goes with dead_letter_topic"),
    ({"value": "avro", "dead_letter_topic": "dlq"}, "goes with dead_letter_topic"),
    ({"value": "avro", "on_poison": "dead-letter", "dead_letter_topic": "a b"}, "dead_letter_topic"),
    ({"value": {"format": "json_schema", "schema": "{}"}}, "supports avro (and bytes) so far"),
    ({"values": "avro"}, "unknown key(s) values"),
])
def test_input_settings_refuse_what_is_not_built(spec, needle):
    with pytest.raises(ConfigError) as err:
        input_settings(spec)
    assert needle in str(err.value)
