"""When a JSON Schema holds for every row by the Arrow column's types alone, rows skip validation.

Why: validating each row with ``jsonschema`` costs ~20 us (about 36 k records/s, the JSON Schema
encoder's whole budget). Event schemas are mostly a closed object of typed properties; when the
struct column's Arrow types can only produce values of those JSON types, the one thing a row can
still get wrong is a null where the schema has none, and that is a vectorised null count. Any
other keyword (``minimum``, ``pattern``, ``enum``, ``format``, ...) or type pairing returns
``None`` and every row is validated as before.
"""

from __future__ import annotations

from typing import Any

__all__ = ["first_refused_row", "static_plan"]

_OBJECT_KEYWORDS = {"$schema", "$id", "title", "description", "type", "properties", "required",
                    "additionalProperties"}
_PROPERTY_KEYWORDS = {"type", "title", "description", "items"}


def static_plan(schema: Any, arrow_type: Any) -> list[tuple[str, bool]] | None:
    """``(field, items)`` pairs that must hold no null (``items``: the list's items, else the field
    itself); every other value is valid by its type. None when rows must be validated one by one."""
    import pyarrow as pa

    if not isinstance(schema, dict) or set(schema) - _OBJECT_KEYWORDS or schema.get("type") != "object":
        return None
    if schema.get("additionalProperties", True) not in (True, False) or not pa.types.is_struct(arrow_type):
        return None
    properties = schema.get("properties", {})
    if set(schema.get("required", [])) - set(arrow_type.names):
        return None  # a required property no column provides: every row is refused, by the row path
    non_null: list[tuple[str, bool]] = []
    for index in range(arrow_type.num_fields):
        field = arrow_type.field(index)
        prop = properties.get(field.name)
        if prop is None:
            return None  # not a property: the row path names it (or an open schema takes anything)
        fit = _fits(prop, field.type)
        if fit is None:
            return None
        nullable, items_nullable = fit
        if not nullable:
            non_null.append((field.name, False))
        if items_nullable is False:
            non_null.append((field.name, True))
    return non_null


def _fits(prop: Any, arrow_type: Any) -> tuple[bool, bool | None] | None:
    """(null allowed, null allowed in the items or None for no items) when every non-null value of
    ``arrow_type`` is valid for ``prop``; None when that cannot be told from the types."""
    import pyarrow as pa

    if not isinstance(prop, dict) or set(prop) - _PROPERTY_KEYWORDS or "type" not in prop:
        return None
    kinds = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
    nullable = "null" in kinds
    kinds = [k for k in kinds if k != "null"]
    if len(kinds) != 1:
        return None
    kind = kinds[0]
    items_nullable = None
    if kind == "integer":
        ok = pa.types.is_integer(arrow_type)
    elif kind == "number":  # NaN and infinity: the JSON encoder refuses them (allow_nan=False)
        ok = pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)
    elif kind == "string":
        ok = arrow_type in (pa.string(), pa.large_string())
    elif kind == "boolean":
        ok = arrow_type == pa.bool_()
    elif kind == "array" and (pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)):
        items = _fits(prop["items"], arrow_type.value_type) if "items" in prop else None
        ok = items is not None and items[1] is None  # lists of lists: row by row
        items_nullable = items[0] if ok else None
    else:
        ok = False
    if "items" in prop and kind != "array":
        return None
    return (nullable, items_nullable) if ok else None


def first_refused_row(plan: list[tuple[str, bool]], column: Any) -> tuple[int, str] | None:
    """(row, why) of the first row holding a null ``plan`` does not allow (the row the one-by-one
    validation would refuse first), or None."""
    import numpy as np
    import pyarrow.compute as pc

    row_valid = column.is_valid()
    valid_rows = row_valid.to_numpy(zero_copy_only=False)
    first: tuple[int, str] | None = None
    for name, items in plan:
        child = column.field(name)
        if items:  # a null item in a row's list
            counts = pc.list_value_length(child).fill_null(0).to_numpy(zero_copy_only=False)
            item_nulls = pc.is_null(pc.list_flatten(child)).to_numpy(zero_copy_only=False)
            rows = np.repeat(np.arange(len(child)), counts)[item_nulls]
            rows = rows[valid_rows[rows]]
            found = (int(rows[0]), f"at {name}: a null item where the schema has none") if len(rows) else None
        else:
            bad = pc.and_(row_valid, pc.is_null(child)).to_numpy(zero_copy_only=False)
            found = (int(np.argmax(bad)), f"at {name}: None is not allowed") if bad.any() else None
        if found is not None and (first is None or found[0] < first[0]):
            first = found
    return first

