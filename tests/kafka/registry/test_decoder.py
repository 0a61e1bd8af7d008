"""Kafka-input decoding (``kafka/registry/decoder.py``): records framed by confluent-kafka's own
AvroSerializer against the real registry (Apicurio) decoded into Arrow, resolved to the reader
schema; every kind of poison record named by topic, partition and offset. And, without a registry,
the column types of each format's reader schema (``arrow_types.py``) and the framing read back
(``wire.py``). Protobuf and JSON Schema records: test_decoder_formats.py."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from airflow_provider_kafka_eos.kafka.errors import ConfigError, PoisonRecordError
from airflow_provider_kafka_eos.kafka.registry.arrow_types import (
    arrow_type_of_avro,
    arrow_type_of_json_schema,
    arrow_type_of_protobuf,
)
from airflow_provider_kafka_eos.kafka.registry.config import RegistryConfig, SerdeSetting
from airflow_provider_kafka_eos.kafka.registry.decoder import AvroDecoder, input_settings, protobuf_row
from airflow_provider_kafka_eos.kafka.registry.wire import read_wire_header, wire_header

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
    ({"value": {"format": "json_schema", "schema": "{}"}}, "JSON Schema type null is not supported"),
    ({"value": {"format": "json_schema",
                "schema": '{"type": "object", "properties": {"a": {"$ref": "#/x"}}}'}},
     "property 'a': $ref is not supported"),
    ({"key": {"format": "avro", "schema": '{"type": "enum", "name": "E", "symbols": ["A"]}'}},
     "the input key's schema: Avro type"),
    ({"value": {"format": "avro", "schema": '{"type": "record", "name": "R", "fields": "x"}'}},
     "the Avro schema does not parse"),
    ({"values": "avro"}, "unknown key(s) values"),
])
def test_input_settings_refuse_what_is_not_built(spec, needle):
    with pytest.raises(ConfigError) as err:
        input_settings(spec)
    assert needle in str(err.value)


def test_protobuf_reader_schemas_give_columns_and_rows_for_every_field_kind():
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    file_proto = descriptor_pb2.FileDescriptorProto(name="kinds.proto", package="k", syntax="proto3")
    file_proto.enum_type.add(name="Color").value.add(name="RED", number=0)
    file_proto.enum_type[0].value.add(name="BLUE", number=1)
    msg = file_proto.message_type.add(name="Kinds")
    entry = msg.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    msg.field.add(name="color", number=1, type=F.TYPE_ENUM, type_name=".k.Color", label=F.LABEL_OPTIONAL)
    msg.field.add(name="counts", number=2, type=F.TYPE_MESSAGE, type_name=".k.Kinds.CountsEntry",
                  label=F.LABEL_REPEATED)
    msg.field.add(name="maybe", number=3, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL, proto3_optional=True,
                  oneof_index=0)
    msg.oneof_decl.add(name="_maybe")
    msg.field.add(name="big", number=4, type=F.TYPE_UINT64, label=F.LABEL_OPTIONAL)
    msg.field.add(name="small", number=5, type=F.TYPE_UINT32, label=F.LABEL_OPTIONAL)
    msg.field.add(name="child", number=6, type=F.TYPE_MESSAGE, type_name=".k.Leaf", label=F.LABEL_OPTIONAL)
    file_proto.message_type.add(name="Leaf").field.add(name="x", number=1, type=F.TYPE_FLOAT,
                                                       label=F.LABEL_OPTIONAL)
    loop = file_proto.message_type.add(name="Loop")
    loop.field.add(name="next", number=1, type=F.TYPE_MESSAGE, type_name=".k.Loop", label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_proto)
    kinds = message_factory.GetMessageClass(pool.FindMessageTypeByName("k.Kinds"))

    arrow = arrow_type_of_protobuf(kinds.DESCRIPTOR, where="w")
    assert arrow == pa.struct([
        pa.field("color", pa.string(), False), pa.field("counts", pa.map_(pa.string(), pa.int64()), False),
        pa.field("maybe", pa.int32()), pa.field("big", pa.decimal128(20, 0), False),
        pa.field("small", pa.int64(), False),
        pa.field("child", pa.struct([pa.field("x", pa.float32(), False)]))])
    rows = [protobuf_row(kinds(color=1, counts={"a": 2}, maybe=0, big=2**64 - 1, small=2**32 - 1)),
            protobuf_row(kinds(child={"x": 0.5}))]
    assert rows == [{"color": "BLUE", "counts": [("a", 2)], "maybe": 0, "big": 2**64 - 1,
                     "small": 2**32 - 1, "child": None},
                    {"color": "RED", "counts": [], "maybe": None, "big": 0, "small": 0, "child": {"x": 0.5}}]
    assert pa.array(rows, arrow).to_pylist()[0]["counts"] == [("a", 2)]
    with pytest.raises(PoisonRecordError, match=r"enum number 7, which the reader's enum k\.Color does not"):
        protobuf_row(kinds.FromString(b"\x08\x07"))  # a newer writer's enum value
    with pytest.raises(ConfigError, match=r"w, field 'next': message k\.Loop contains itself"):
        arrow_type_of_protobuf(pool.FindMessageTypeByName("k.Loop"), where="w")


def test_json_schema_reader_schemas_give_columns():
    schema = {"type": "object", "required": ["id"], "properties": {
        "id": {"type": "integer"}, "name": {"type": "string"}, "score": {"type": ["number", "null"]},
        "ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}},
        "inner": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}
    arrow, nullable = arrow_type_of_json_schema(schema, where="w")
    assert arrow == pa.struct([
        pa.field("id", pa.int64(), False), pa.field("name", pa.string()), pa.field("score", pa.float64()),
        pa.field("ok", pa.bool_()), pa.field("tags", pa.list_(pa.string())),
        pa.field("inner", pa.struct([pa.field("x", pa.int64(), False)]))])
    assert not nullable
    with pytest.raises(ConfigError, match=r"w, property 'u': type \[.string., .integer.\] is not supported"):
        arrow_type_of_json_schema({"type": "object", "properties": {"u": {"type": ["string", "integer"]}}},
                                  where="w")


@pytest.mark.parametrize("indexes", [None, (0,), (1,), (2, 0, 300)])
def test_the_framing_reads_back_as_it_was_written(indexes):
    raw = wire_header(70000, protobuf_indexes=indexes) + b"payload"
    schema_id, read, start = read_wire_header(raw, protobuf=indexes is not None)
    assert (schema_id, read, raw[start:]) == (70000, indexes, b"payload")


@pytest.mark.parametrize("raw", [b"", b"\x01\x00\x00\x00\x01x", b"\x00\x00\x00\x00\x01",
                                 b"\x00\x00\x00\x00\x01\x04\x02"])
def test_unframed_bytes_are_poison_records(raw):
    with pytest.raises(PoisonRecordError, match="not in the Confluent wire format"):
        read_wire_header(raw, protobuf=True)
