"""The writer's record formats: the key and value columns encoded in the Confluent wire format.

Three steps, each where it belongs:

- :func:`parse` on the driver, before any Kafka connection: the settings are valid and the
  DataFrame's key/value columns are structs of the schemas' fields (the Spark schema, no data);
- :meth:`Formats.resolve` on the driver, once per checkpoint, after restore found no existing
  manifest and before any transaction is opened: the registry checks and the schema ids
  (``kafka/registry/resolver.py``); a rerun of a prepared or committed checkpoint returns its
  manifest first and never re-resolves;
- :func:`encode_batches` in each task: every Arrow batch's ``k``/``v`` columns framed with the fixed
  ids (``kafka/registry/encoder.py``), no registry call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import ConfigError, PoisonRecordError, SchemaMismatchError
from airflow_provider_kafka_eos.kafka.registry.config import RecordFormats
from airflow_provider_kafka_eos.kafka.registry.resolver import ResolvedSchema
from airflow_provider_kafka_eos.spark.requirements import (
    MISSING_MARKER,
    RUNBOOK,
    Requirement,
    missing_requirement_error,
)

__all__ = ["FORMAT_REQUIREMENTS", "Formats", "ResolvedFormats", "check_importable", "encode_batches", "parse",
           "translate_task_failure"]

# What each format's encoder imports (the [registry] extra), on the driver and in every task.
FORMAT_REQUIREMENTS: dict[str, Requirement] = {
    "avro": Requirement("fastavro", "fastavro", "record format avro, the [registry] extra"),
    "json_schema": Requirement("jsonschema", "jsonschema", "record format json_schema, the [registry] extra"),
    "protobuf": Requirement("protobuf", "google.protobuf.message_factory",
                            "record format protobuf, the [registry] extra"),
}


@dataclasses.dataclass(frozen=True)
class ResolvedFormats:
    """The ids a checkpoint writes with (picklable: it travels to the tasks)."""

    key: ResolvedSchema | None
    value: ResolvedSchema | None

    def describe(self) -> dict[str, Any]:
        return {name: None if resolved is None else resolved.describe()
                for name, resolved in (("key", self.key), ("value", self.value))}


@dataclasses.dataclass(frozen=True)
class Formats:
    settings: RecordFormats

    def resolve(self, topic: str) -> ResolvedFormats:
        from airflow_provider_kafka_eos.kafka.registry.resolver import registry_client, resolve_schema

        registry = self.settings.registry
        if registry is None:  # pragma: no cover - RecordFormats refuses a registry format without one
            raise ValueError("record formats without a schema registry")
        client = registry_client(registry)
        resolved = {
            name: resolve_schema(registry, setting, topic, is_key=name == "key", client=client)
            if setting.uses_registry else None
            for name, setting in (("key", self.settings.key), ("value", self.settings.value))
        }
        return ResolvedFormats(**resolved)


def parse(record_formats: RecordFormats | Mapping[str, Any] | None, df: Any, *, key_col: str,
          value_col: str) -> Formats | None:
    """``None`` when both key and value are bytes (the writer's path of old, untouched)."""
    if record_formats is None:
        return None
    settings = (record_formats if isinstance(record_formats, RecordFormats)
                else RecordFormats(**record_formats))
    if not settings.uses_registry:
        return None
    check_importable([s.format.value for s in (settings.key, settings.value) if s.uses_registry],
                     where="the driver's Python")
    for column, setting in ((key_col, settings.key), (value_col, settings.value)):
        if setting.uses_registry:
            _check_spark_column(df, column, setting)
    return Formats(settings)


def _check_spark_column(df: Any, column: str, setting: Any) -> None:
    """The DataFrame's column against the schema's fields, from the Spark schema alone."""
    from pyspark.sql.types import StructType

    from airflow_provider_kafka_eos.kafka.registry.encoder import encoder_for

    # The id is not known yet: a placeholder names the subject's schema in a refusal.
    label = f"column {column!r} ({setting.format.value})"
    probe = encoder_for(ResolvedSchema(format=setting.format.value, subject=label,
                                       schema_id=None, schema=setting.schema, registry_url=""))
    kind = df.schema[column].dataType
    names = [f.name for f in kind.fields] if isinstance(kind, StructType) else None
    probe.check_field_names(names, kind.simpleString())


def encode_batches(batches: Iterator[Any], resolved: ResolvedFormats, *, partition: int | None = None
                   ) -> Iterator[Any]:
    """Each batch with its key (column 0) and value (column 1) encoded; the other columns as they are."""
    import pyarrow as pa

    from airflow_provider_kafka_eos.kafka.registry.encoder import encoder_for

    check_importable([r.format for r in (resolved.key, resolved.value) if r is not None],
                     where=requirements_where(), marked=True)
    encoders = {i: encoder_for(r) for i, r in ((0, resolved.key), (1, resolved.value)) if r is not None}
    rows_of = f" of Spark partition {partition}" if partition is not None else ""
    seen = 0
    for batch in batches:
        columns = list(batch.columns)
        for index, encoder in encoders.items():
            columns[index] = encoder.encode(columns[index], first_row=seen, rows_of=rows_of)
        seen += batch.num_rows
        yield pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def translate_task_failure(exc: BaseException) -> SchemaMismatchError | PoisonRecordError | None:
    """The task's ``SchemaMismatchError`` (an output row) or ``PoisonRecordError`` (an input record)
    out of Spark's task-failure text (a Python worker's error reaches the driver as a Spark
    exception carrying the traceback), or None."""
    text = str(exc)
    for kind in (SchemaMismatchError, PoisonRecordError):
        marker = f"{kind.__module__}.{kind.__name__}: "
        start = text.find(marker)
        if start >= 0:
            line = text[start + len(marker):].splitlines()[0]
            return kind(line.split(". Next step:", 1)[0].strip())
    return None


def check_importable(formats: list[str], *, where: str, marked: bool = False) -> None:
    """One ``ConfigError`` naming every package the formats need and ``where`` lacks (``marked``: in
    a task, found by the driver in Spark's failure text, ``spark/requirements.py``)."""
    import importlib

    missing = []
    for name in dict.fromkeys(formats):
        requirement = FORMAT_REQUIREMENTS.get(name)
        if requirement is None:
            continue
        try:
            importlib.import_module(requirement.module)
        except ImportError as exc:
            missing.append((requirement, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
    if missing:
        specs = {r.distribution: r.distribution for r, _ in missing}
        error = missing_requirement_error(missing, specs, where=where)
        if marked:
            error = ConfigError(f"{MISSING_MARKER} {error.cause}", runbook=RUNBOOK)
        raise error


def requirements_where() -> str:
    from airflow_provider_kafka_eos.spark.requirements import executor_python

    return executor_python()

