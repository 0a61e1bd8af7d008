"""Arrow columns encoded in the Confluent wire format, read back by confluent-kafka's own
deserializers: straight, and after a transaction on the broker read by a read_committed consumer.

``provider_logic``: the encoding is the provider's; no broker changes the bytes it is handed, so
these run once, on the embedded broker (with the one registry server of the session).
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from airflow_provider_kafka_eos.kafka.errors import SchemaMismatchError
from airflow_provider_kafka_eos.kafka.registry.config import RegistryConfig, SerdeSetting
from airflow_provider_kafka_eos.kafka.registry.encoder import encoder_for
from airflow_provider_kafka_eos.kafka.registry.resolver import registry_client, resolve_schema
from kafka_eos_testing.embedded import unique_name
from kafka_eos_testing.transactions import produce_transaction

pytestmark = [pytest.mark.broker, pytest.mark.provider_logic]
pytest.importorskip("confluent_kafka.schema_registry.avro")

AVRO = json.dumps({
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "paid", "type": "boolean"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "lines", "type": {"type": "array", "items": "int"}},
        {"name": "blob", "type": "bytes"},
    ],
})
JSON_SCHEMA = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "shop.Order", "type": "object",
    "properties": {"id": {"type": "integer"}, "customer": {"type": "string"}, "amount": {"type": "number"},
                   "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["id", "customer", "amount"], "additionalProperties": False,
})


def _orders(n: int) -> pa.StructArray:
    return pa.StructArray.from_arrays(
        [pa.array(range(n), pa.int64()), pa.array([f"c{i}" for i in range(n)]),
         pa.array([i * 1.25 for i in range(n)]), pa.array([i % 2 == 0 for i in range(n)]),
         pa.array([None if i % 3 else f"n{i}" for i in range(n)]),
         pa.array([[i, i + 1] for i in range(n)], pa.list_(pa.int32())),
         pa.array([bytes([i % 256]) * 3 for i in range(n)], pa.binary())],
        names=["id", "customer", "amount", "paid", "note", "lines", "blob"])


def _resolve(schema_registry, topic: str, fmt: str, schema: str):
    config = RegistryConfig(schema_registry.url)
    return config, resolve_schema(config, SerdeSetting(format=fmt, schema=schema, auto_register=True), topic)


def _read_committed(bootstrap: str, topic: str) -> list[tuple[bytes, bytes | None]]:
    """Every (key, value) of partition 0, as a read_committed consumer sees it, up to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("g"),
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[bytes, bytes | None]] = []
        while True:
            message = consumer.poll(30)
            assert message is not None, f"no record and no end of {topic} within 30 s"
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                return out
            out.append((message.key(), message.value()))
    finally:
        consumer.close()


def test_avro_records_read_back_by_kafkas_deserializer_after_a_committed_transaction(
        schema_registry, kafka_broker, registry_topic):
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    config, resolved = _resolve(schema_registry, registry_topic, "avro", AVRO)
    column = _orders(50)
    encoded = encoder_for(resolved).encode(column)
    assert encoded.type == pa.binary() and len(encoded) == 50
    values = dict(zip((str(i).encode() for i in range(50)), encoded.to_pylist(), strict=True))
    produce_transaction(kafka_broker.bootstrap, unique_name("txn"), registry_topic, list(values),
                        commit=True, partitions=[0], value=values.__getitem__)
    records = _read_committed(kafka_broker.bootstrap, registry_topic)
    assert [key for key, _ in records] == list(values)  # every key once, in order
    deserialize = AvroDeserializer(registry_client(config))
    context = SerializationContext(registry_topic, MessageField.VALUE)
    decoded = [deserialize(value, context) for _, value in records]
    assert decoded == column.to_pylist()
    assert {value[1:5] for _, value in records} == {resolved.schema_id.to_bytes(4, "big")}


def test_json_schema_records_read_back_by_kafkas_deserializer(schema_registry, kafka_broker, registry_topic):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    config, resolved = _resolve(schema_registry, registry_topic, "json_schema", JSON_SCHEMA)
    column = pa.StructArray.from_arrays(
        [pa.array([1, 2, 3], pa.int64()), pa.array(["a", "b", "ü"]), pa.array([0.5, 2.0, -1.0]),
         pa.array([["x"], [], ["y", "z"]])], names=["id", "customer", "amount", "tags"])
    encoded = encoder_for(resolved).encode(column)
    values = dict(zip((b"k1", b"k2", b"k3"), encoded.to_pylist(), strict=True))
    produce_transaction(kafka_broker.bootstrap, unique_name("txn"), registry_topic, list(values),
                        commit=True, partitions=[0], value=values.__getitem__)
    records = _read_committed(kafka_broker.bootstrap, registry_topic)
    deserialize = JSONDeserializer(JSON_SCHEMA, schema_registry_client=registry_client(config))
    context = SerializationContext(registry_topic, MessageField.VALUE)
    assert [deserialize(value, context) for _, value in records] == column.to_pylist()


def test_null_rows_stay_tombstones_and_slices_encode_their_own_rows(schema_registry, registry_topic):
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    config, resolved = _resolve(schema_registry, registry_topic, "avro", AVRO)
    full = _orders(10)
    with_nulls = pa.StructArray.from_arrays(full.flatten(), names=[f.name for f in full.type],
                                            mask=pa.array([i in (2, 5) for i in range(10)]))
    sliced = with_nulls.slice(1, 6)  # rows 1..6: nulls at 1 and 4 of the slice
    encoded = encoder_for(resolved).encode(sliced)
    assert encoded.null_count == 2
    assert encoded.is_null().to_pylist() == [False, True, False, False, True, False]
    deserialize = AvroDeserializer(registry_client(config))
    context = SerializationContext(registry_topic, MessageField.VALUE)
    decoded = [deserialize(v, context) if v is not None else None for v in encoded.to_pylist()]
    assert decoded == sliced.to_pylist()


def test_columns_that_do_not_match_the_schema_are_refused_by_name(schema_registry, registry_topic):
    _, resolved = _resolve(schema_registry, registry_topic, "avro", AVRO)
    encoder = encoder_for(resolved)
    full = _orders(3)
    renamed = pa.StructArray.from_arrays(full.flatten(), names=["id", "client", *full.type.names[2:]])
    with pytest.raises(SchemaMismatchError,
                       match=r"missing field\(s\) customer; field\(s\) not in the schema client"):
        encoder.encode(renamed)
    wrong_type = pa.StructArray.from_arrays([pa.array(["x", "y", "z"]), *full.flatten()[1:]],
                                            names=full.type.names)
    with pytest.raises(SchemaMismatchError, match=r"row 0 does not match the writer's schema") as err:
        encoder.encode(wrong_type)
    assert resolved.subject in str(err.value)
    with pytest.raises(SchemaMismatchError, match="not a struct"):
        encoder.encode(pa.array([b"raw"]))


def test_json_rows_failing_validation_are_refused_with_the_path(schema_registry, registry_topic):
    _, resolved = _resolve(schema_registry, registry_topic, "json_schema", JSON_SCHEMA)
    column = pa.StructArray.from_arrays([pa.array([1, 2]), pa.array(["a", None]), pa.array([1.0, 2.0])],
                                        names=["id", "customer", "amount"])
    with pytest.raises(SchemaMismatchError, match=r"row 1 .*at customer: None is not allowed"):
        encoder_for(resolved).encode(column)


def test_protobuf_records_read_back_by_kafkas_deserializer(schema_registry, kafka_broker, registry_topic):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from registry_protos import order_message

    from airflow_provider_kafka_eos.kafka.registry.config import protobuf_schema

    message = order_message()
    _, resolved = _resolve(schema_registry, registry_topic, "protobuf", protobuf_schema(message))
    assert resolved.subject == f"{registry_topic}-value"
    column = pa.StructArray.from_arrays(
        [pa.array([1, 2, 3], pa.int64()), pa.array(["a", "b", None]), pa.array([0.5, 2.0, -1.0]),
         pa.array([True, False, True]), pa.array([b"\x00\x01", b"", b"z"]),
         pa.array([[{"sku": 7, "qty": 2}], [], [{"sku": 8, "qty": 1}, {"sku": 9, "qty": 5}]])],
        names=["id", "customer", "amount", "paid", "blob", "lines"])
    encoded = encoder_for(resolved).encode(column)
    assert {v[:6] for v in encoded.to_pylist()} == {b"\x00" + resolved.schema_id.to_bytes(4, "big") + b"\x00"}
    values = dict(zip((b"k1", b"k2", b"k3"), encoded.to_pylist(), strict=True))
    produce_transaction(kafka_broker.bootstrap, unique_name("txn"), registry_topic, list(values),
                        commit=True, partitions=[0], value=values.__getitem__)
    records = _read_committed(kafka_broker.bootstrap, registry_topic)
    deserialize = ProtobufDeserializer(message, {"use.deprecated.format": False})
    context = SerializationContext(registry_topic, MessageField.VALUE)
    decoded = [deserialize(value, context) for _, value in records]
    expected = [message(**{k: v for k, v in row.items() if v is not None}) for row in column.to_pylist()]
    assert decoded == expected
    assert decoded[2].customer == "" and decoded[2].lines[1].qty == 5
