"""Rows of a JSON Schema whose validity follows from the Arrow types skip per-row validation: the
output and the refusals are the same as with every row validated (jsonschema, the reference)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_kafka_eos.kafka.errors import SchemaMismatchError
from airflow_provider_kafka_eos.kafka.registry.encoder import encoder_for
from airflow_provider_kafka_eos.kafka.registry.json_static import static_plan
from airflow_provider_kafka_eos.kafka.registry.resolver import ResolvedSchema

SCHEMA = {"type": "object", "title": "t", "additionalProperties": False, "required": ["id", "tags"],
          "properties": {"id": {"type": "integer"}, "name": {"type": ["string", "null"]},
                         "score": {"type": "number"}, "ok": {"type": "boolean"},
                         "tags": {"type": "array", "items": {"type": "string"}}}}
TYPES = pa.struct([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64()), ("ok", pa.bool_()),
                   ("tags", pa.list_(pa.string()))])

_row = st.fixed_dictionaries({
    "id": st.none() | st.integers(-(2**63), 2**63 - 1), "name": st.none() | st.text(max_size=5),
    "score": st.none() | st.floats(allow_nan=False, allow_infinity=False), "ok": st.none() | st.booleans(),
    "tags": st.none() | st.lists(st.none() | st.text(max_size=3), max_size=3),
})


def _encode(column: pa.StructArray, *, static: bool):
    encoder = encoder_for(ResolvedSchema("json_schema", "t-value", 9, json.dumps(SCHEMA), "http://r"))
    if not static:
        encoder._static[column.type] = None  # force the reference path: every row validated
    try:
        return encoder.encode(column).to_pylist()
    except SchemaMismatchError as err:
        return ("refused", str(err).split(" does not match")[0])


def test_the_plan_covers_typed_properties_only():
    assert static_plan(SCHEMA, TYPES) == [("id", False), ("score", False), ("ok", False), ("tags", False),
                                          ("tags", True)]
    assert static_plan({**SCHEMA, "properties": {**SCHEMA["properties"], "id": {"type": "integer",
                                                                              "minimum": 0}}}, TYPES) is None
    assert static_plan(SCHEMA, pa.struct([("id", pa.float64())])) is None  # a float is not an integer
    open_schema = {**SCHEMA, "additionalProperties": True}
    assert static_plan(open_schema, pa.struct([("id", pa.int64())])) is None  # 'tags' is required


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.none() | _row, min_size=1, max_size=12))
def test_static_rows_encode_and_refuse_as_validated_rows(rows):
    filled = [r or dict.fromkeys(TYPES.names) for r in rows]
    column = pa.StructArray.from_arrays([pa.array([r[n] for r in filled], TYPES.field(n).type)
                                         for n in TYPES.names], fields=list(TYPES),
                                        mask=pa.array([r is None for r in rows]))
    assert _encode(column, static=True) == _encode(column, static=False)


@pytest.mark.parametrize("sliced", [False, True])
def test_a_null_list_item_is_refused_naming_its_row(sliced):
    rows = [{"id": 1, "name": None, "score": 1.0, "ok": True, "tags": ["a"]}] * 3
    rows = [*rows, {**rows[0], "tags": ["b", None]}]
    column = pa.StructArray.from_arrays([pa.array([r[n] for r in rows], TYPES.field(n).type)
                                         for n in TYPES.names], fields=list(TYPES))
    if sliced:
        column = column.slice(1)
    assert _encode(column, static=True) == ("refused", f"subject 't-value' (schema id 9): row {3 - sliced}")
