"""The Arrow type of a Kafka input's decoded key or value, from the pipeline's (reader) schema alone.

Why from the schema: the driver declares the DataFrame's schema before any record is read (Spark's
``mapInArrow`` needs it), so the columns cannot depend on what the records hold. A type that has no
column form here is refused by name when the pipeline is checked, never met in a task.

- Avro: primitives, ``["null", T]`` unions, records, arrays, maps;
- Protobuf (a message descriptor): scalars (``uint32`` as int64, ``uint64`` as decimal(20, 0):
  Spark has no unsigned types), enums as their names, messages as structs (null when absent),
  repeated fields as lists, map fields as maps; a proto3 scalar is never null (its default);
- JSON Schema: ``object`` with ``properties`` (a struct; a property not ``required`` is nullable),
  ``array`` with ``items``, ``string``, ``integer`` (int64), ``number`` (double), ``boolean``, and
  ``[T, "null"]``; composition (``$ref``, ``oneOf``, ...) is refused.
"""

from __future__ import annotations

import json
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import ConfigError

__all__ = ["arrow_type_of_avro", "arrow_type_of_json_schema", "arrow_type_of_protobuf", "is_protobuf_map",
           "is_protobuf_repeated"]

_AVRO_PRIMITIVES = {"boolean": "bool_", "int": "int32", "long": "int64", "float": "float32",
                    "double": "float64", "string": "string", "bytes": "binary"}
_JSON_PRIMITIVES = {"string": "string", "integer": "int64", "number": "float64", "boolean": "bool_"}


def arrow_type_of_avro(schema: Any, *, where: str = "the reader schema") -> tuple[Any, bool]:
    """(Arrow type, nullable) of an Avro type: primitives, ``["null", X]`` unions, records, arrays
    and maps of those; anything else is refused by name (the columns must be known up front)."""
    import pyarrow as pa

    if isinstance(schema, str) and schema in _AVRO_PRIMITIVES:
        return getattr(pa, _AVRO_PRIMITIVES[schema])(), False
    if isinstance(schema, list):
        others = [s for s in schema if s != "null"]
        if len(others) == 1 and len(schema) == 2:
            return arrow_type_of_avro(others[0], where=where)[0], True
        raise ConfigError(f"{where}: union {json.dumps(schema)} is not supported for Kafka-input decoding "
                          "(only [\"null\", T])")
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "record":
            fields = []
            for field in schema.get("fields", []):
                arrow, nullable = arrow_type_of_avro(field["type"], where=f"{where}, field {field['name']!r}")
                fields.append(pa.field(field["name"], arrow, nullable=nullable))
            return pa.struct(fields), False
        if kind == "array":
            return pa.list_(arrow_type_of_avro(schema["items"], where=where)[0]), False
        if kind == "map":
            return pa.map_(pa.string(), arrow_type_of_avro(schema["values"], where=where)[0]), False
        if kind in _AVRO_PRIMITIVES and not schema.get("logicalType"):
            return arrow_type_of_avro(kind, where=where)
    raise ConfigError(f"{where}: Avro type {json.dumps(schema)} is not supported for Kafka-input decoding "
                      "yet (primitives, [\"null\", T], records, arrays, maps)")


def arrow_type_of_protobuf(message: Any, *, where: str, seen: tuple[str, ...] = ()) -> Any:
    """The Arrow struct of a Protobuf message descriptor (``Message.DESCRIPTOR``); a message that
    contains itself has no finite column type and is refused."""
    import pyarrow as pa

    if message.full_name in seen:
        raise ConfigError(f"{where}: message {message.full_name} contains itself; recursive messages are not "
                          "supported for Kafka-input decoding")
    inner, fields = (*seen, message.full_name), []
    for field in message.fields:
        at = f"{where}, field {field.name!r}"
        if is_protobuf_map(field):
            key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
            arrow = pa.map_(_protobuf_value_type(key, at, inner), _protobuf_value_type(value, at, inner))
        elif is_protobuf_repeated(field):
            arrow = pa.list_(_protobuf_value_type(field, at, inner))
        else:  # a message field, or a proto3 `optional` scalar, can be absent: null
            arrow = _protobuf_value_type(field, at, inner)
            fields.append(pa.field(field.name, arrow, nullable=bool(field.has_presence)))
            continue
        fields.append(pa.field(field.name, arrow, nullable=False))
    return pa.struct(fields)


def _protobuf_value_type(field: Any, where: str, seen: tuple[str, ...]) -> Any:
    import pyarrow as pa

    kinds = {
        field.TYPE_DOUBLE: pa.float64, field.TYPE_FLOAT: pa.float32, field.TYPE_BOOL: pa.bool_,
        field.TYPE_STRING: pa.string, field.TYPE_BYTES: pa.binary, field.TYPE_ENUM: pa.string,
        field.TYPE_INT64: pa.int64, field.TYPE_SINT64: pa.int64, field.TYPE_SFIXED64: pa.int64,
        field.TYPE_INT32: pa.int32, field.TYPE_SINT32: pa.int32, field.TYPE_SFIXED32: pa.int32,
        field.TYPE_UINT32: pa.int64, field.TYPE_FIXED32: pa.int64,
        field.TYPE_UINT64: lambda: pa.decimal128(20, 0), field.TYPE_FIXED64: lambda: pa.decimal128(20, 0),
    }
    if field.type == field.TYPE_MESSAGE:
        return arrow_type_of_protobuf(field.message_type, where=where, seen=seen)
    if field.type in kinds:
        return kinds[field.type]()
    raise ConfigError(f"{where}: Protobuf field type {field.type} is not supported for Kafka-input decoding")


def is_protobuf_repeated(field: Any) -> bool:
    """A repeated field (or a map's entries)."""
    if hasattr(field, "is_repeated"):  # newer protobuf releases dropped ``label``
        return bool(field.is_repeated)
    return field.label == field.LABEL_REPEATED


def is_protobuf_map(field: Any) -> bool:
    """A map field (a repeated field of the generated ``...Entry`` messages)."""
    return (is_protobuf_repeated(field) and field.type == field.TYPE_MESSAGE
            and field.message_type.GetOptions().map_entry)


def arrow_type_of_json_schema(schema: Any, *, where: str) -> tuple[Any, bool]:
    """(Arrow type, nullable) of a JSON Schema (see the module's docstring for what is supported)."""
    import pyarrow as pa

    if not isinstance(schema, dict):
        raise ConfigError(f"{where}: JSON Schema {json.dumps(schema)} has no column type; give an object "
                          "schema with a \"type\"")
    kind, nullable = schema.get("type"), False
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        if len(others) != 1 or len(kind) != 2:
            raise ConfigError(f"{where}: type {json.dumps(kind)} is not supported for Kafka-input decoding "
                              "(one type, or [T, \"null\"])")
        kind, nullable = others[0], True
    composed = sorted(k for k in ("$ref", "oneOf", "anyOf", "allOf", "not", "if") if k in schema)
    if composed:
        raise ConfigError(f"{where}: {', '.join(composed)} is not supported for Kafka-input decoding; "
                          "give the types inline")
    if kind in _JSON_PRIMITIVES:
        return getattr(pa, _JSON_PRIMITIVES[kind])(), nullable
    if kind == "array" and isinstance(schema.get("items"), dict):
        return pa.list_(arrow_type_of_json_schema(schema["items"], where=f"{where}, items")[0]), nullable
    if kind == "object" and isinstance(schema.get("properties"), dict) and schema["properties"]:
        required = set(schema.get("required", []))
        fields = []
        for name, sub in schema["properties"].items():
            arrow, sub_nullable = arrow_type_of_json_schema(sub, where=f"{where}, property {name!r}")
            fields.append(pa.field(name, arrow, nullable=sub_nullable or name not in required))
        return pa.struct(fields), nullable
    raise ConfigError(f"{where}: JSON Schema type {json.dumps(kind)} is not supported for Kafka-input "
                      "decoding (objects with properties, arrays with items, string, integer, number, "
                      "boolean)")
