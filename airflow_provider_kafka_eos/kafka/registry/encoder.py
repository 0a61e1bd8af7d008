"""Arrow columns to records in the Confluent wire format (``wire.py``), on the executors.

The schema id comes from :func:`~.resolver.resolve_schema` on the driver; the encoder never
calls the registry. Encoding works a whole Arrow column at a time: one Python list of the rows
(``to_pylist``, in C++), one call of the format's encoder per row into one shared buffer (the
5-byte header written before each), and one ``BinaryArray`` built from that buffer and the offsets
(no Python ``bytes`` object per record). A null row (a null struct) stays null: a tombstone.

A column that does not match the schema fails before anything is written, with the field and the
row named (:class:`SchemaMismatchError`).
"""

from __future__ import annotations

import io
import json
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import ConfigError, SchemaMismatchError
from airflow_provider_kafka_eos.kafka.registry.resolver import ResolvedSchema
from airflow_provider_kafka_eos.kafka.registry.schemas import (
    avro_schema,
    json_schema_validator,
    protobuf_message_class,
)
from airflow_provider_kafka_eos.kafka.registry.wire import wire_header

__all__ = ["RecordEncoder", "encoder_for"]


class RecordEncoder:
    """Encodes Arrow struct columns for one resolved schema (built once per Spark partition)."""

    def __init__(self, resolved: ResolvedSchema) -> None:
        self.resolved = resolved
        # no id yet: an encoder that only checks columns (on the driver, before resolution)
        self.header = wire_header(resolved.schema_id) if resolved.schema_id is not None else b""

    def fields(self) -> list[str] | None:
        """The schema's top-level field names (None when the schema is not a record)."""
        return None

    def check_columns(self, arrow_type: Any) -> None:
        """Refuse a column that is not a struct of the schema's fields."""
        import pyarrow as pa

        if self.fields() is None:
            return
        if not pa.types.is_struct(arrow_type):
            self.check_field_names(None, str(arrow_type))
        self.check_field_names([arrow_type.field(i).name for i in range(arrow_type.num_fields)], "")

    def check_field_names(self, present: list[str] | None, column_type: str) -> None:
        """Refuse a column whose fields are not the schema's (a missing or an extra one); ``present``
        None: the column is not a struct (its type, ``column_type``, is named). Also used on the
        driver with the DataFrame's schema, before anything is prepared."""
        expected = self.fields()
        if expected is None:
            return
        where = (f"subject {self.resolved.subject!r} (schema id {self.resolved.schema_id})"
                 if self.resolved.schema_id is not None else self.resolved.subject)
        if present is None:
            raise SchemaMismatchError(
                f"{where}: the column to encode is {column_type}, not a struct of the schema's fields "
                f"({', '.join(expected)}); select them into one struct column (pyspark: F.struct(...))"
            )
        missing = [f for f in expected if f not in present and not self._has_default(f)]
        extra = [f for f in present if f not in expected]
        if missing or extra:
            detail = "; ".join(part for part in (
                f"missing field(s) {', '.join(missing)}" if missing else "",
                f"field(s) not in the schema {', '.join(extra)}" if extra else "") if part)
            raise SchemaMismatchError(
                f"{where}: the columns do not match the writer's schema: {detail}; rename or select the "
                "columns to the schema's fields"
            )

    def _has_default(self, field: str) -> bool:
        return False

    def encode(self, column: Any, *, first_row: int = 0, rows_of: str = "") -> Any:
        """A ``BinaryArray`` of framed records, one per row of ``column`` (a pyarrow struct array).

        A refused row is named as ``first_row`` + its index ``rows_of`` (e.g. " of Spark partition 3")."""
        import numpy as np
        import pyarrow as pa

        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        self.check_columns(column.type)
        rows = column.to_pylist()
        buffer = io.BytesIO()
        offsets = np.zeros(len(rows) + 1, dtype=np.int32)
        header = self.header
        write_header = buffer.write
        for index, row in enumerate(rows):
            if row is not None:
                write_header(header)
                try:
                    self._write(buffer, row)
                except SchemaMismatchError:
                    raise
                except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
                    raise self.refused_row(first_row + index, rows_of,
                                           f"{type(exc).__name__}: {_short(exc)}") from None
            offsets[index + 1] = buffer.tell()
        if buffer.tell() > np.iinfo(np.int32).max:
            raise SchemaMismatchError(
                f"subject {self.resolved.subject!r}: one Arrow batch of {len(rows)} rows encodes to more "
                "than 2 GiB; lower spark.sql.execution.arrow.maxRecordsPerBatch")
        encoded = pa.BinaryArray.from_buffers(pa.binary(), len(rows), [None, pa.py_buffer(offsets.tobytes()),
                                                                        pa.py_buffer(buffer.getbuffer())])
        if column.null_count:  # null rows stay null (tombstones), not empty values
            import pyarrow.compute as pc

            encoded = pc.if_else(column.is_valid(), encoded, pa.scalar(None, pa.binary()))
        return encoded

    def refused_row(self, row: int, rows_of: str, detail: str) -> SchemaMismatchError:
        return SchemaMismatchError(
            f"subject {self.resolved.subject!r} (schema id {self.resolved.schema_id}): row {row}{rows_of} "
            f"does not match the writer's schema ({detail}); fix the column's type or value, or the schema"
        )

    def _write(self, buffer: io.BytesIO, row: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class AvroEncoder(RecordEncoder):
    """Avro binary through fastavro's schemaless writer (C): the same bytes as Kafka's serializer."""

    def __init__(self, resolved: ResolvedSchema) -> None:
        super().__init__(resolved)
        import fastavro

        self.parsed = avro_schema(resolved.schema, where=f"subject {resolved.subject!r}")
        self._writer = fastavro.schemaless_writer
        is_record = isinstance(self.parsed, dict) and self.parsed.get("type") == "record"
        record = self.parsed if is_record else None
        self._fields = {f["name"]: f for f in record["fields"]} if record else None
        self._plans: dict[Any, Any] = {}  # Arrow type -> avro_vector plan (None: row by row)

    def fields(self) -> list[str] | None:
        return list(self._fields) if self._fields is not None else None

    def encode(self, column: Any, *, first_row: int = 0, rows_of: str = "") -> Any:
        """Flat records of primitive fields column by column (``avro_vector.py``), else row by row."""
        import pyarrow as pa

        from airflow_provider_kafka_eos.kafka.registry import avro_vector

        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if column.type not in self._plans:
            self._plans[column.type] = avro_vector.plan(self.parsed, column.type)
        plan = self._plans[column.type]
        if plan is not None and self.header:
            def refuse(row: int, field: str, cause: str) -> None:
                raise self.refused_row(first_row + row, rows_of, f"{cause} on field {field}")

            encoded = plan.encode(column, self.header, refuse)
            if encoded is not None:
                return encoded
        return super().encode(column, first_row=first_row, rows_of=rows_of)

    def _has_default(self, field: str) -> bool:
        return self._fields is not None and "default" in self._fields[field]

    def _write(self, buffer: io.BytesIO, row: Any) -> None:
        self._writer(buffer, self.parsed, row)


class JsonSchemaEncoder(RecordEncoder):
    """JSON text, each row validated against the JSON Schema first (as Kafka's serializer does)."""

    def __init__(self, resolved: ResolvedSchema) -> None:
        super().__init__(resolved)
        where = f"subject {resolved.subject!r}"
        schema, self._validator = json_schema_validator(resolved.schema, where=where)
        properties = schema.get("properties") if isinstance(schema, dict) else None
        closed = isinstance(schema, dict) and schema.get("additionalProperties") is False
        self._fields = list(properties) if properties and closed else None
        self._required = set(schema.get("required", [])) if isinstance(schema, dict) else set()
        self._dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
        self._schema = schema
        self._static: dict[Any, Any] = {}  # Arrow type -> json_static plan (None: validate each row)
        self._validate = True

    def fields(self) -> list[str] | None:
        return self._fields

    def encode(self, column: Any, *, first_row: int = 0, rows_of: str = "") -> Any:
        """Rows skip validation when the column's types guarantee it (``json_static.py``), after a
        vectorised check of the nulls the schema does not allow."""
        import pyarrow as pa

        from airflow_provider_kafka_eos.kafka.registry.json_static import first_refused_row, static_plan

        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if column.type not in self._static:
            self._static[column.type] = static_plan(self._schema, column.type)
        plan = self._static[column.type]
        if plan is not None:
            self.check_columns(column.type)
            refused = first_refused_row(plan, column)
            if refused is not None:
                raise self.refused_row(first_row + refused[0], rows_of, refused[1])
        self._validate = plan is None
        return super().encode(column, first_row=first_row, rows_of=rows_of)

    def _has_default(self, field: str) -> bool:
        return field not in self._required

    def _write(self, buffer: io.BytesIO, row: Any) -> None:
        error = next(self._validator.iter_errors(row), None) if self._validate else None
        if error is not None:
            path = "/".join(str(p) for p in error.absolute_path) or "(the record)"
            raise ValueError(f"at {path}: {error.message}")
        buffer.write(self._dumps(row).encode())


class ProtobufEncoder(RecordEncoder):
    """Protobuf messages of the schema's first message type (message index ``[0]``), built from the
    schema's ``FileDescriptorProto`` (the base64 form confluent-kafka's serializer registers; see
    :func:`~.config.protobuf_schema`), so no generated code or .proto compiler is needed here."""

    def __init__(self, resolved: ResolvedSchema) -> None:
        super().__init__(resolved)
        self._message = protobuf_message_class(resolved.schema, where=f"subject {resolved.subject!r}")
        self._fields = [f.name for f in self._message.DESCRIPTOR.fields]
        if resolved.schema_id is not None:
            self.header = wire_header(resolved.schema_id, protobuf_indexes=(0,))

    def fields(self) -> list[str] | None:
        return self._fields

    def _has_default(self, field: str) -> bool:
        return True  # proto3: every field may be absent (its default)

    def _write(self, buffer: io.BytesIO, row: Any) -> None:
        buffer.write(self._message(**row).SerializeToString())


_ENCODERS: dict[str, type[RecordEncoder]] = {
    "avro": AvroEncoder, "json_schema": JsonSchemaEncoder, "protobuf": ProtobufEncoder,
}


def encoder_for(resolved: ResolvedSchema) -> RecordEncoder:
    """The encoder of ``resolved.format``."""
    try:
        return _ENCODERS[resolved.format](resolved)
    except KeyError:
        raise ConfigError(f"subject {resolved.subject!r}: no encoder for format {resolved.format!r} yet; "
                          f"supported: {', '.join(_ENCODERS)}") from None


def _short(exc: BaseException) -> str:
    return (str(exc).splitlines() or [""])[0][:200]
