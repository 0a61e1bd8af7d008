"""Kafka-input records in the Confluent wire format decoded into Arrow columns (Avro for now).

The input side of record formats: a Kafka-input pipeline reads records another team wrote with
Kafka's serializers, so each record names its writer's schema by id. The pipeline gives the
*reader* schema (the fields its callable expects, ``SerdeSetting.schema``); each record is decoded
with its writer schema, fetched from the registry once per id and task, resolved to the reader
schema by Avro's own rules (fastavro). The columns' Arrow type comes from the reader schema alone,
so the driver knows the DataFrame's schema before any record is read.

A record that cannot be decoded (not framed, a schema id the registry does not know, bytes that do
not decode, a writer schema the reader cannot resolve) is a *poison record*: under the ``fail``
policy, :class:`PoisonRecordError` names its topic, partition and offset and the cause.
"""

from __future__ import annotations

import io
import json
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import ConfigError, PoisonRecordError
from airflow_provider_kafka_eos.kafka.registry.config import RecordFormat, RegistryConfig, SerdeSetting

__all__ = ["POISON_POLICIES", "AvroDecoder", "arrow_type_of_avro", "decoder_for", "input_settings",
           "poison_policy"]

POISON_POLICIES = ("fail", "dead-letter")
_PRIMITIVES = {"boolean": "bool_", "int": "int32", "long": "int64", "float": "float32",
               "double": "float64", "string": "string", "bytes": "binary"}


def arrow_type_of_avro(schema: Any, *, where: str = "the reader schema") -> tuple[Any, bool]:
    """(Arrow type, nullable) of an Avro type: primitives, ``["null", X]`` unions, records, arrays
    and maps of those; anything else is refused by name (the columns must be known up front)."""
    import pyarrow as pa

    if isinstance(schema, str) and schema in _PRIMITIVES:
        return getattr(pa, _PRIMITIVES[schema])(), False
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
        if kind in _PRIMITIVES and not schema.get("logicalType"):
            return arrow_type_of_avro(kind, where=where)
    raise ConfigError(f"{where}: Avro type {json.dumps(schema)} is not supported for Kafka-input decoding "
                      "yet (primitives, [\"null\", T], records, arrays, maps)")


class AvroDecoder:
    """Decodes one column (a key or a value) of framed Avro records; picklable (ships to the tasks)."""

    def __init__(self, setting: SerdeSetting, registry: RegistryConfig, *, part: str = "value") -> None:
        if setting.format is not RecordFormat.AVRO:
            raise ConfigError(f"input {part} format {setting.format.value!r}: Kafka-input decoding supports "
                              "avro (and bytes) so far")
        self.part = part
        self.reader = json.loads(setting.schema or "null")
        self.registry = registry
        self.arrow_type, _ = arrow_type_of_avro(self.reader, where=f"the input {part}'s schema")
        self._writers: dict[int, Any] = {}
        self._client: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_writers": {}, "_client": None}  # caches stay in their process

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
        import fastavro
        import pyarrow as pa

        reader = fastavro.parse_schema(self.reader)
        rows: list[Any] = []
        causes: list[str | None] = []
        for raw in values.to_pylist():
            cause = None
            try:  # a tombstone (None) stays null
                rows.append(None if raw is None else fastavro.schemaless_reader(
                    io.BytesIO(raw[5:]), self._writer_schema(raw), reader))
            except PoisonRecordError as exc:
                cause = exc.cause
            except Exception as exc:  # fastavro's decode and resolution errors have no common base
                cause = f"it does not decode under the schema ({type(exc).__name__}: {_short(exc)})"
            if cause is not None:
                rows.append(None)
            causes.append(cause)
        return pa.array(rows, type=self.arrow_type), causes

    def _writer_schema(self, raw: bytes) -> Any:
        import fastavro

        if len(raw) < 5 or raw[0] != 0:
            raise PoisonRecordError("it is not in the Confluent wire format (no magic byte 0 and schema id)")
        schema_id = int.from_bytes(raw[1:5], "big")
        if schema_id not in self._writers:
            self._writers[schema_id] = fastavro.parse_schema(json.loads(self._fetch(schema_id)))
        return self._writers[schema_id]

    def _fetch(self, schema_id: int) -> str:
        from confluent_kafka.schema_registry.error import SchemaRegistryError as ClientError

        from airflow_provider_kafka_eos.kafka.registry.resolver import registry_client

        self._client = self._client or registry_client(self.registry)
        try:
            schema = self._client.get_schema(schema_id)
        except ClientError as exc:
            if exc.http_status_code == 404:
                raise PoisonRecordError(f"schema id {schema_id} is unknown to schema registry "
                                        f"{self.registry.display_url}") from None
            raise
        if (schema.schema_type or "AVRO") != "AVRO":
            raise PoisonRecordError(f"schema id {schema_id} is a {schema.schema_type} schema, not Avro")
        return schema.schema_str

    def _poison(self, cause: str, topics: Any, partitions: Any, offsets: Any,
                index: int) -> PoisonRecordError:
        where = (f"topic {topics[index].as_py()!r} partition {partitions[index].as_py()} "
                 f"offset {offsets[index].as_py()}")
        return PoisonRecordError(
            f"input record at {where}: its {self.part} cannot be decoded: {cause}; the policy is 'fail', so "
            "the run stops and nothing of this checkpoint is committed. Fix or skip the record")


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
        if setting.uses_registry:
            AvroDecoder(setting, RegistryConfig("http://checked.invalid"), part=part)  # refuses the rest
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


def decoder_for(setting: SerdeSetting, registry: RegistryConfig | None, *, part: str) -> AvroDecoder | None:
    """The part's decoder, or None for bytes (the column stays as Spark's Kafka source gives it)."""
    if not setting.uses_registry:
        return None
    if registry is None:
        raise ConfigError(f"input {part} format {setting.format.value!r} needs a schema registry connection")
    return AvroDecoder(setting, registry, part=part)


def _short(exc: BaseException) -> str:
    return (str(exc).splitlines() or [""])[0][:200]
