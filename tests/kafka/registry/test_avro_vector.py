"""The column-at-a-time Avro encoder writes exactly fastavro's bytes (fastavro is the reference:
Kafka's deserializers read its output, tests/kafka/registry/test_encoder.py)."""

from __future__ import annotations

import io
import json
import struct

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_kafka_eos.kafka.errors import SchemaMismatchError
from airflow_provider_kafka_eos.kafka.registry import avro_vector
from airflow_provider_kafka_eos.kafka.registry.encoder import encoder_for
from airflow_provider_kafka_eos.kafka.registry.resolver import ResolvedSchema

SCHEMA = {"type": "record", "name": "Flat", "fields": [
    {"name": "l", "type": "long"}, {"name": "i", "type": "int"}, {"name": "d", "type": "double"},
    {"name": "f", "type": "float"}, {"name": "b", "type": "boolean"}, {"name": "s", "type": "string"},
    {"name": "y", "type": "bytes"}, {"name": "ns", "type": ["null", "string"]},
    {"name": "nl", "type": ["long", "null"]}, {"name": "nd", "type": ["null", {"type": "double"}]},
]}
TYPES = {"l": pa.int64(), "i": pa.int32(), "d": pa.float64(), "f": pa.float32(), "b": pa.bool_(),
         "s": pa.string(), "y": pa.binary(), "ns": pa.large_string(), "nl": pa.int64(), "nd": pa.float64()}
HEADER = b"\x00\x00\x00\x01\x02"

_int64 = st.integers(-(2**63), 2**63 - 1)
_row = st.fixed_dictionaries({
    "l": _int64, "i": st.integers(-(2**31), 2**31 - 1),
    "d": st.floats(allow_nan=False), "f": st.floats(width=32, allow_nan=False), "b": st.booleans(),
    "s": st.text(max_size=20), "y": st.binary(max_size=300),
    "ns": st.none() | st.text(max_size=5), "nl": st.none() | _int64,
    "nd": st.none() | st.floats(allow_nan=False),
})


def _reference(rows: list[dict | None]) -> list[bytes | None]:
    parsed = fastavro.parse_schema(SCHEMA)
    out = []
    for row in rows:
        if row is None:
            out.append(None)
            continue
        buffer = io.BytesIO(HEADER)
        buffer.seek(len(HEADER))
        fastavro.schemaless_writer(buffer, parsed, row)
        out.append(buffer.getvalue())
    return out


def _column(rows: list[dict | None]) -> pa.StructArray:
    filled = [row or {name: None for name in TYPES} for row in rows]
    children = [pa.array([r[name] for r in filled], TYPES[name]) for name in TYPES]
    return pa.StructArray.from_arrays(children, names=list(TYPES),
                                      mask=pa.array([row is None for row in rows], pa.bool_()))


def _encoder():
    return encoder_for(ResolvedSchema("avro", "flat-value", int.from_bytes(HEADER[1:], "big"),
                                      json.dumps(SCHEMA), "http://registry"))


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.none() | _row, max_size=40), cut=st.integers(0, 5))
def test_columns_encode_to_fastavros_bytes(rows, cut):
    column = _column(rows)
    assert avro_vector.plan(fastavro.parse_schema(SCHEMA), column.type) is not None  # the vector path
    sliced = column.slice(min(cut, len(rows)))
    expected = _reference(rows[min(cut, len(rows)):])
    assert _encoder().encode(sliced).to_pylist() == expected


def test_shapes_it_does_not_cover_go_row_by_row():
    parse = fastavro.parse_schema
    nested = parse({"type": "record", "name": "N", "fields": [{"name": "a", "type": {"type": "array",
                                                                                    "items": "int"}}]})
    assert avro_vector.plan(nested, pa.struct([("a", pa.list_(pa.int32()))])) is None
    flat = parse({"type": "record", "name": "F", "fields": [{"name": "a", "type": "int"}]})
    assert avro_vector.plan(flat, pa.struct([("a", pa.int64())])) is None  # fastavro's range check applies
    assert avro_vector.plan(flat, pa.struct([("a", pa.int32())])) is not None
    float_field = parse({"type": "record", "name": "G", "fields": [{"name": "a", "type": "float"}]})
    assert avro_vector.plan(float_field, pa.struct([("a", pa.float64())])) is None  # rounding is fastavro's


def test_a_null_in_a_field_without_null_names_the_row_and_field():
    rows = [{name: None for name in TYPES} | {"l": 1, "i": 1, "d": 1.0, "f": 1.0, "b": True, "s": "x",
                                               "y": b"", "ns": None, "nl": None, "nd": None}] * 3
    rows = [*rows[:2], {**rows[0], "s": None}]
    with pytest.raises(SchemaMismatchError,
                       match=r"row 12 of Spark partition 4 does not match .*null.* on field s\)"):
        _encoder().encode(_column(rows), first_row=10, rows_of=" of Spark partition 4")


def test_varints_at_the_edges():
    values = [0, -1, 1, 63, -64, 64, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)]
    rows = [{"l": v, "i": 0, "d": 0.0, "f": 0.0, "b": False, "s": "", "y": b"", "ns": None, "nl": v,
             "nd": None} for v in values]
    assert _encoder().encode(_column(rows)).to_pylist() == _reference(rows)
    assert struct.unpack(">I", _encoder().encode(_column(rows[:1])).to_pylist()[0][1:5])[0] == 0x102
