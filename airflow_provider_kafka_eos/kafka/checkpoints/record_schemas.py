"""The manifest's ``record_formats``: per topic, the schema each encoded key/value was written with.

Why in the manifest: the schema id is fixed for the whole checkpoint, resolved once before any
transaction opened (``kafka/registry/resolver.py``); recording it with the vote tells an operator,
and a consumer team chasing a bad record, exactly which registered schema a committed checkpoint's
records carry, without asking the registry what it says today. A commit or a rerun reads it and
never re-resolves. No secret: the registry's URL is recorded without user info.

Shape (an optional field of schema version 4, ``docs/manifest-format.md``)::

    {"<topic>": {"key": null | ENTRY, "value": null | ENTRY}}
    ENTRY = {"format": "avro" | "protobuf" | "json_schema", "subject": str, "schema_id": int,
             "registry_url": str}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import ManifestError
from airflow_provider_kafka_eos.kafka.protocol.committable import reject_unknown, require_field

__all__ = ["RECORD_FORMATS_FIELD", "parse_record_formats"]

RECORD_FORMATS_FIELD = "record_formats"
_FORMATS = ("avro", "protobuf", "json_schema")
_ENTRY_FIELDS = {"format": str, "subject": str, "schema_id": int, "registry_url": str}


def parse_record_formats(value: Any, *, source: str) -> dict[str, dict[str, Any]]:
    """The field checked strictly (every error names the uri and the field's path)."""
    if not isinstance(value, Mapping):
        raise ManifestError(f"{source}: field {RECORD_FORMATS_FIELD!r} must be an object of topics")
    parsed: dict[str, dict[str, Any]] = {}
    for topic, parts in value.items():
        where = f"{RECORD_FORMATS_FIELD}.{topic}"
        if not isinstance(parts, Mapping):
            raise ManifestError(f"{source}: field {where!r} must be an object with key and value")
        reject_unknown(parts, {"key", "value"}, source, where)
        parsed[topic] = {part: _entry(parts.get(part), source, f"{where}.{part}")
                         for part in ("key", "value")}
    return parsed


def _entry(entry: Any, source: str, where: str) -> dict[str, Any] | None:
    if entry is None:
        return None
    if not isinstance(entry, Mapping):
        raise ManifestError(f"{source}: field {where!r} must be null or an object")
    reject_unknown(entry, set(_ENTRY_FIELDS), source, where)
    checked = {name: require_field(entry, name, kind, source, f"{where}.{name}")
               for name, kind in _ENTRY_FIELDS.items()}
    if checked["format"] not in _FORMATS:
        raise ManifestError(f"{source}: field '{where}.format' must be one of {', '.join(_FORMATS)}, "
                            f"got {checked['format']!r}")
    if checked["schema_id"] < 0:
        raise ManifestError(f"{source}: field '{where}.schema_id' must be >= 0, got {checked['schema_id']}")
    return checked
