"""Kafka-input records in the Confluent wire format decoded into Arrow columns: Avro, Protobuf and
JSON Schema, the formats the output encodes.

The input side of record formats: a Kafka-input pipeline reads records another team wrote with
Kafka's serializers, so each record names its writer's schema by id. The pipeline gives the
*reader* schema (the fields its callable expects, ``SerdeSetting.schema``), and the columns' Arrow
type comes from it alone (``arrow_types.py``), so the driver knows the DataFrame's schema before
any record is read. Each record's schema id is looked up in the registry once per id and task (a
schema id the registry does not know is a poison record; a registry that does not answer fails the
task as :class:`SchemaRegistryError`: an outage is not the record's fault). Then, by format:

- Avro: decoded with the writer schema, resolved to the reader schema by Avro's rules (fastavro);
- Protobuf: parsed as the reader schema's first message, as confluent-kafka's deserializer does
  with its message class (Protobuf's field numbers keep writer and reader compatible); a record of
  another message (its message indexes are not ``[0]``) is refused;
- JSON Schema: the JSON text validated against the reader schema (jsonschema), then the columns.

A record that cannot be decoded (not framed, a schema id the registry does not know or of another
format, bytes that do not decode, values that do not fit the reader's columns) is a *poison
record*: under the ``fail`` policy, :class:`PoisonRecordError` names its topic, partition and
offset and the cause; under ``dead-letter``, :meth:`RecordDecoder.decode_marking` gives the cause.
"""

from __future__ import annotations

import io
import json
from typing import Any, ClassVar

from airflow_provider_kafka_eos.kafka.errors import ConfigError, PoisonRecordError
from airflow_provider_kafka_eos.kafka.registry.config import RecordFormat, RegistryConfig, SerdeSetting

__all__ = ["POISON_POLICIES", "AvroDecoder", "JsonSchemaDecoder", "ProtobufDecoder", "RecordDecoder",
           "decoder_for", "input_settings", "poison_policy"]

POISON_POLICIES = ("fail", "dead-letter")
_COLUMN_ERRORS = (ValueError, TypeError, OverflowError, ArithmeticError)  # pyarrow's conversion errors


class RecordDecoder:
    """Decodes one column (a key or a value) of framed records; picklable (ships to the tasks: what
    cannot be pickled, a Protobuf message class, the registry client, is built again there)."""

    format: ClassVar[RecordFormat]

    def __init__(self, setting: SerdeSetting, registry: RegistryConfig, *, part: str = "value") -> None:
        self.part = part
        self.schema = setting.schema or ""
        self.registry = registry
        self.where = f"the input {part}'s schema"
        self._cache: dict[str, Any] = {}
        self.arrow_type = self._arrow_type(self._reader())  # an unsupported schema is refused here

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cache": {}}  # caches stay in their process

    def decode(self, values: Any, topics: Any, partitions: Any, offsets: Any) -> Any:
        """The Arrow column of ``values`` decoded; a record that does not decode raises
        :class:`PoisonRecordError` naming where it is (the ``fail`` policy)."""
        column, causes = self.decode_marking(values)
        for index, cause in enumerate(causes):
            if cause is not None:
                raise self._poison(cause, topics, partitions, offsets, index)
        return column

    def decode_marking(self, values: Any) -> tuple[Any, list[str | None]]:
        """The column decoded, a poison record null in it, and each row's cause (None: decoded),
        for the ``dead-letter`` policy."""
        rows: list[Any] = []
        causes: list[str | None] = []
        for raw in values.to_pylist():
            cause = None
            try:  # a tombstone (None) stays null
                rows.append(None if raw is None else self._decode_one(raw))
            except PoisonRecordError as exc:
                cause = exc.cause
                rows.append(None)
            causes.append(cause)
        return self._column(rows, causes), causes

    def _decode_one(self, raw: bytes) -> Any:
        from airflow_provider_kafka_eos.kafka.registry.wire import read_wire_header

        schema_id, indexes, start = read_wire_header(raw, protobuf=self.format is RecordFormat.PROTOBUF)
        writer = self._writer(schema_id)  # a registry that does not answer raises SchemaRegistryError
        try:
            return self._decode_payload(raw[start:], writer, indexes)
        except PoisonRecordError:
            raise
        except Exception as exc:  # fastavro's, protobuf's and json's decode errors have no common base
            raise PoisonRecordError(f"it does not decode under the schema ({type(exc).__name__}: "
                                    f"{_short(exc)})") from None

    def _column(self, rows: list[Any], causes: list[str | None]) -> Any:
        """The Arrow column of ``rows``; a row whose values do not fit the reader's column types (a
        JSON number out of int64's range, say) is found one by one and marked poison."""
        import pyarrow as pa

        try:
            return pa.array(rows, type=self.arrow_type)
        except _COLUMN_ERRORS:
            pass
        for index, row in enumerate(rows):
            try:
                pa.array([row], type=self.arrow_type)
            except _COLUMN_ERRORS as exc:
                rows[index] = None
                causes[index] = (f"its values do not fit the reader schema's columns ({type(exc).__name__}: "
                                 f"{_short(exc)})")
        return pa.array(rows, type=self.arrow_type)

    def _writer(self, schema_id: int) -> Any:
        """What the format needs of the record's writer schema (fetched once per id and task); an id
        the registry does not know, or a schema of another format, is remembered as poison too."""
        writers = self._cache.setdefault("writers", {})
        if schema_id not in writers:
            try:
                writers[schema_id] = self._writer_of(schema_id, self._fetch(schema_id))
            except PoisonRecordError as exc:
                writers[schema_id] = exc
        found = writers[schema_id]
        if isinstance(found, PoisonRecordError):
            raise found
        return found

    def _fetch(self, schema_id: int) -> str:
        from confluent_kafka.schema_registry.error import SchemaRegistryError as ClientError

        from airflow_provider_kafka_eos.kafka.registry import resolver

        with resolver.registry_errors_translated(self.registry, None, schema_id=schema_id):
            if "client" not in self._cache:
                self._cache["client"] = resolver.registry_client(self.registry)
            try:
                schema = self._cache["client"].get_schema(schema_id)
            except ClientError as exc:
                if exc.http_status_code == 404:
                    raise PoisonRecordError(f"schema id {schema_id} is unknown to schema registry "
                                            f"{self.registry.display_url}") from None
                raise
        found = schema.schema_type or "AVRO"
        if found != self.format.registry_type:
            raise PoisonRecordError(f"schema id {schema_id} is a {found} schema, not "
                                    f"{self.format.registry_type} (the input {self.part}'s format is "
                                    f"{self.format.value})")
        return schema.schema_str

    def _reader(self) -> Any:
        """The reader schema made ready to decode with (built once per process)."""
        if "reader" not in self._cache:
            self._cache["reader"] = self._build_reader()
        return self._cache["reader"]

    def _poison(self, cause: str, topics: Any, partitions: Any, offsets: Any,
                index: int) -> PoisonRecordError:
        where = (f"topic {topics[index].as_py()!r} partition {partitions[index].as_py()} "
                 f"offset {offsets[index].as_py()}")
        return PoisonRecordError(
            f"input record at {where}: its {self.part} cannot be decoded: {cause}; the policy is 'fail', so "
            "the run stops and nothing of this checkpoint is committed. Fix or skip the record")

    # the format's own parts
    def _build_reader(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _arrow_type(self, reader: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _writer_of(self, schema_id: int, schema_str: str) -> Any:
        return None  # Protobuf and JSON Schema decode with the reader schema alone

    def _decode_payload(self, payload: bytes, writer: Any, indexes: tuple[int, ...] | None
                        ) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


class AvroDecoder(RecordDecoder):
    """Avro binary, decoded with the writer schema and resolved to the reader's (fastavro)."""

    format = RecordFormat.AVRO

    def _build_reader(self) -> Any:
        from airflow_provider_kafka_eos.kafka.registry.schemas import avro_schema

        return avro_schema(self.schema, where=self.where)

    def _arrow_type(self, reader: Any) -> Any:
        from airflow_provider_kafka_eos.kafka.registry.arrow_types import arrow_type_of_avro

        return arrow_type_of_avro(json.loads(self.schema), where=self.where)[0]

    def _writer_of(self, schema_id: int, schema_str: str) -> Any:
        from airflow_provider_kafka_eos.kafka.registry.schemas import avro_schema

        try:
            return avro_schema(schema_str, where=f"schema id {schema_id}")
        except ConfigError as exc:
            raise PoisonRecordError(exc.cause) from None

    def _decode_payload(self, payload: bytes, writer: Any, indexes: tuple[int, ...] | None) -> Any:
        import fastavro

        return fastavro.schemaless_reader(io.BytesIO(payload), writer, self._reader())


class ProtobufDecoder(RecordDecoder):
    """Protobuf messages parsed as the reader schema's first message (its message class built from
    the schema's ``FileDescriptorProto``, as the output's encoder builds it)."""

    format = RecordFormat.PROTOBUF

    def _build_reader(self) -> Any:
        from airflow_provider_kafka_eos.kafka.registry.schemas import protobuf_message_class

        return protobuf_message_class(self.schema, where=self.where)

    def _arrow_type(self, reader: Any) -> Any:
        from airflow_provider_kafka_eos.kafka.registry.arrow_types import arrow_type_of_protobuf

        return arrow_type_of_protobuf(reader.DESCRIPTOR, where=self.where)

    def _decode_payload(self, payload: bytes, writer: Any, indexes: tuple[int, ...] | None) -> Any:
        if indexes != (0,):
            raise PoisonRecordError(
                f"it was written with message index {list(indexes or ())}, and the input {self.part} is read "
                "as the first message of its schema ([0])")
        return protobuf_row(self._reader().FromString(payload))


class JsonSchemaDecoder(RecordDecoder):
    """JSON text, validated against the reader's JSON Schema before it becomes columns."""

    format = RecordFormat.JSON_SCHEMA

    def _build_reader(self) -> Any:
        from airflow_provider_kafka_eos.kafka.registry.schemas import json_schema_validator

        return json_schema_validator(self.schema, where=self.where)

    def _arrow_type(self, reader: Any) -> Any:
        from airflow_provider_kafka_eos.kafka.registry.arrow_types import arrow_type_of_json_schema

        return arrow_type_of_json_schema(reader[0], where=self.where)[0]

    def _decode_payload(self, payload: bytes, writer: Any, indexes: tuple[int, ...] | None) -> Any:
        record = json.loads(payload)
        error = next(self._reader()[1].iter_errors(record), None)
        if error is not None:
            path = "/".join(str(p) for p in error.absolute_path) or "(the record)"
            raise PoisonRecordError(f"it does not match the input {self.part}'s JSON Schema at {path}: "
                                    f"{_short_text(error.message)}")
        return record


def protobuf_row(message: Any) -> dict[str, Any]:
    """A Protobuf message as the row of its Arrow struct (``arrow_types.arrow_type_of_protobuf``):
    an absent message (or proto3 ``optional``) field None, enums by name, maps as key/value pairs."""
    from airflow_provider_kafka_eos.kafka.registry.arrow_types import is_protobuf_map, is_protobuf_repeated

    row: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if is_protobuf_map(field):
            inner = field.message_type.fields_by_name["value"]
            row[field.name] = [(k, _protobuf_value(inner, v)) for k, v in value.items()]
        elif is_protobuf_repeated(field):
            row[field.name] = [_protobuf_value(field, v) for v in value]
        elif field.has_presence and not message.HasField(field.name):
            row[field.name] = None
        else:
            row[field.name] = _protobuf_value(field, value)
    return row


def _protobuf_value(field: Any, value: Any) -> Any:
    if field.type == field.TYPE_MESSAGE:
        return protobuf_row(value)
    if field.type == field.TYPE_ENUM:
        named = field.enum_type.values_by_number.get(value)
        if named is None:
            raise PoisonRecordError(f"field {field.name!r} holds enum number {value}, which the reader's "
                                    f"enum {field.enum_type.full_name} does not name")
        return named.name
    return value


_DECODERS: dict[RecordFormat, type[RecordDecoder]] = {
    RecordFormat.AVRO: AvroDecoder, RecordFormat.PROTOBUF: ProtobufDecoder,
    RecordFormat.JSON_SCHEMA: JsonSchemaDecoder,
}


def input_settings(spec: Any) -> dict[str, SerdeSetting]:
    """The Kafka input's formats (``{"key": ..., "value": ..., "on_poison": "fail"}``) checked: each
    part a ``SerdeSetting`` (fields or a format name), decodable, and a known poison policy."""
    if not isinstance(spec, dict):
        raise ConfigError(f"the input's record formats must be an object, got {type(spec).__name__}")
    unknown = sorted(set(spec) - {"key", "value", "on_poison", "dead_letter_topic"})
    if unknown:
        raise ConfigError(f"the input's record formats: unknown key(s) {', '.join(unknown)}; known: key, "
                          "value, on_poison, dead_letter_topic")
    poison_policy(spec)  # the policy and its topic, checked
    settings = {}
    for part in ("key", "value"):
        given = spec.get(part, "bytes")
        setting = SerdeSetting(**given) if isinstance(given, dict) else SerdeSetting(format=given)
        if setting.uses_registry:  # a reader schema without a column type is refused here
            decoder_for(setting, RegistryConfig("http://checked.invalid"), part=part)
        settings[part] = setting
    return settings


def poison_policy(spec: dict[str, Any]) -> tuple[str, str | None]:
    """(the policy, the dead-letter topic or None) of the input's record formats, checked."""
    from airflow_provider_kafka_eos.kafka.errors import UsageError
    from airflow_provider_kafka_eos.kafka.validation import validate_topic

    policy, topic = spec.get("on_poison", "fail"), spec.get("dead_letter_topic")
    if policy not in POISON_POLICIES:
        raise ConfigError(f"the input's on_poison {policy!r}: the policies are {', '.join(POISON_POLICIES)}")
    if (policy == "dead-letter") != bool(topic):
        raise ConfigError("the input's on_poison 'dead-letter' goes with dead_letter_topic (the topic the "
                          "raw records are written to), and only it")
    if topic:
        try:
            validate_topic(topic, field="dead_letter_topic")
        except UsageError as err:
            raise ConfigError(err.cause) from None
    return policy, topic


def decoder_for(setting: SerdeSetting, registry: RegistryConfig | None, *, part: str) -> RecordDecoder | None:
    """The part's decoder, or None for bytes (the column stays as Spark's Kafka source gives it)."""
    if not setting.uses_registry:
        return None
    if registry is None:
        raise ConfigError(f"input {part} format {setting.format.value!r} needs a schema registry connection")
    return _DECODERS[setting.format](setting, registry, part=part)


def _short(exc: BaseException) -> str:
    return _short_text(str(exc))


def _short_text(text: str) -> str:
    return (text.splitlines() or [""])[0][:200]
