"""Kafka-input decoding of Protobuf and JSON Schema (``kafka/registry/decoder.py``): records written
by confluent-kafka's own ProtobufSerializer / JSONSerializer against the real registry (Apicurio),
committed on the broker and read back by a read_committed consumer, decoded into Arrow columns;
each kind of poison record named by its real topic, partition and offset (``fail``) or marked with
its cause (``dead-letter``); a registry that does not answer is not a poison record.

``provider_logic``: the decoding is the provider's, no broker changes the bytes; these run once, on
the embedded broker (with the one registry server of the session).
"""

from __future__ import annotations

import json
import pickle

import pyarrow as pa
import pytest

from airflow_provider_kafka_eos.kafka.errors import PoisonRecordError, SchemaRegistryError
from airflow_provider_kafka_eos.kafka.registry.config import RegistryConfig, SerdeSetting, protobuf_schema
from airflow_provider_kafka_eos.kafka.registry.decoder import decoder_for
from airflow_provider_kafka_eos.kafka.registry.wire import wire_header
from kafka_eos_testing.embedded import unique_name
from kafka_eos_testing.transactions import produce_transaction
from kafka_eos_testing.verify import committed_messages

pytestmark = [pytest.mark.broker, pytest.mark.provider_logic]
pytest.importorskip("confluent_kafka.schema_registry.protobuf")

JSON_SCHEMA = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "shop.Order", "type": "object",
    "properties": {"id": {"type": "integer"}, "customer": {"type": "string"}, "amount": {"type": "number"},
                   "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["id", "customer", "amount"], "additionalProperties": False,
})
AVRO = json.dumps({"type": "record", "name": "Other", "fields": [{"name": "x", "type": "long"}]})


def _records(fmt: str, registry_url: str, topic: str) -> tuple[str, list[bytes], list[dict]]:
    """(the reader schema, 3 values framed by confluent-kafka's own serializer, the rows expected)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": registry_url})
    context = SerializationContext(topic, MessageField.VALUE)
    if fmt == "protobuf":
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
        from registry_protos import order_message

        message = order_message()
        serialize = ProtobufSerializer(message, client, {"use.deprecated.format": False})
        rows = [{"id": i, "customer": f"c{i}", "amount": i / 2, "paid": i % 2 == 0, "blob": bytes([i]),
                 "lines": [{"sku": 10 + i, "qty": i}] * i} for i in range(3)]
        return protobuf_schema(message), [serialize(message(**r), context) for r in rows], rows
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    serialize = JSONSerializer(JSON_SCHEMA, client)
    rows = [{"id": i, "customer": f"c{i}", "amount": i / 2, "tags": ["a"] * i} for i in range(3)]
    return JSON_SCHEMA, [serialize(r, context) for r in rows], rows


def _poison(fmt: str, kind: str, good: bytes, registry_url: str) -> tuple[bytes, str]:
    """(a poison value of ``kind`` next to ``good``, what its cause says)."""
    schema_id = int.from_bytes(good[1:5], "big")
    if kind == "unknown id":
        return wire_header(987654) + good[5:], "schema id 987654 is unknown to schema registry"
    if kind == "another format":
        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

        avro_id = SchemaRegistryClient({"url": registry_url}).register_schema(unique_name("avro"),
                                                                              Schema(AVRO, "AVRO"))
        return wire_header(avro_id) + good[5:], f"schema id {avro_id} is a AVRO schema, not "
    if kind == "not decoding":
        return good[:6] + b"\xff\xff\xff", "it does not decode under the schema"
    if fmt == "protobuf":  # kind "not the reader's": a Refund (message index [1]) of the writer's schema
        return wire_header(schema_id, protobuf_indexes=(1,)) + b"\x08\x07", "written with message index [1]"
    return (wire_header(schema_id) + b'{"id": "seven", "customer": "c", "amount": 1}',
            "does not match the input value's JSON Schema at id")


@pytest.mark.parametrize("fmt", ["protobuf", "json_schema"])
def test_records_from_kafkas_serializer_decode_through_a_committed_transaction(
        fmt, schema_registry, kafka_broker, registry_topic):
    reader, values, rows = _records(fmt, schema_registry.url, registry_topic)
    poison, cause = _poison(fmt, "unknown id", values[0], schema_registry.url)
    by_key = {b"k0": values[0], b"k1": values[1], b"bad": poison, b"k2": values[2], b"gone": None}
    produce_transaction(kafka_broker.bootstrap, unique_name("txn"), registry_topic, list(by_key),
                        commit=True, partitions=[0], value=by_key.__getitem__)
    consumed = _arrow(committed_messages(kafka_broker.bootstrap, registry_topic))
    decoder = _decoder(fmt, reader, schema_registry.url)
    decoder = pickle.loads(pickle.dumps(decoder))  # as Spark ships it to the tasks
    column, causes = decoder.decode_marking(consumed[0])  # the dead-letter policy
    assert column.to_pylist() == [rows[0], rows[1], None, rows[2], None]  # "gone": a tombstone stays null
    assert [c is None for c in causes] == [True, True, False, True, True] and cause in causes[2]
    assert column.type.field("id").type == pa.int64() and not column.type.field("id").nullable
    with pytest.raises(PoisonRecordError) as err:  # the fail policy: the record's own offset
        decoder.decode(*consumed)
    assert f"input record at topic '{registry_topic}' partition 0 offset 2: its value cannot be decoded" \
        in str(err.value)


@pytest.mark.parametrize("kind", ["unknown id", "another format", "not decoding", "not the reader's"])
@pytest.mark.parametrize("fmt", ["protobuf", "json_schema"])
def test_each_kind_of_poison_record_is_named_or_marked_for_the_dead_letter_topic(
        fmt, kind, schema_registry, registry_topic):
    reader, values, rows = _records(fmt, schema_registry.url, registry_topic)
    poison, cause = _poison(fmt, kind, values[0], schema_registry.url)
    decoder = _decoder(fmt, reader, schema_registry.url)
    column = pa.array([values[0], values[1], poison, values[2]], pa.binary())
    with pytest.raises(PoisonRecordError) as err:  # the fail policy
        decoder.decode(column, pa.array(["orders-in"] * 4), pa.array([3] * 4, pa.int32()),
                       pa.array(range(40, 44), pa.int64()))
    where = "input record at topic 'orders-in' partition 3 offset 42: its value cannot be decoded"
    assert where in str(err.value)
    assert cause in str(err.value) and err.value.runbook == "poison-record"
    decoded, causes = decoder.decode_marking(column)  # the dead-letter policy
    assert decoded.to_pylist() == [rows[0], rows[1], None, rows[2]]
    assert [c is None for c in causes] == [True, True, False, True] and cause in causes[2]


def test_a_json_value_out_of_its_columns_range_is_poison_not_a_failed_batch(schema_registry, registry_topic):
    reader, values, rows = _records("json_schema", schema_registry.url, registry_topic)
    schema_id = int.from_bytes(values[0][1:5], "big")
    huge = wire_header(schema_id) + json.dumps({"id": 2**70, "customer": "c", "amount": 1}).encode()
    decoder = _decoder("json_schema", reader, schema_registry.url)
    column, causes = decoder.decode_marking(pa.array([values[0], huge, values[1]], pa.binary()))
    assert column.to_pylist() == [rows[0], None, rows[1]]
    assert causes[0] is None and "do not fit the reader schema's columns" in causes[1]


def test_a_registry_that_does_not_answer_fails_the_task_and_poisons_no_record(schema_registry,
                                                                              registry_topic):
    reader, values, _ = _records("json_schema", schema_registry.url, registry_topic)
    down = RegistryConfig("http://127.0.0.1:9", timeout_s=2, max_retries=0)  # discard port: nothing listens
    decoder = decoder_for(SerdeSetting(format="json_schema", schema=reader), down, part="value")
    with pytest.raises(SchemaRegistryError) as err:
        decoder.decode_marking(pa.array(values, pa.binary()))  # even under dead-letter: no record to blame
    assert not isinstance(err.value, PoisonRecordError)
    schema_id = int.from_bytes(values[0][1:5], "big")
    assert f"schema id {schema_id} on schema registry http://127.0.0.1:9: the registry is unreachable" \
        in str(err.value)


def _decoder(fmt: str, reader: str, registry_url: str):
    return decoder_for(SerdeSetting(format=fmt, schema=reader), RegistryConfig(registry_url), part="value")


def _arrow(messages: list) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """The consumed records as the Kafka source's columns: value, topic, partition, offset."""
    return (pa.array([m.value() for m in messages], pa.binary()), pa.array([m.topic() for m in messages]),
            pa.array([m.partition() for m in messages], pa.int32()),
            pa.array([m.offset() for m in messages], pa.int64()))
