"""A schema's text made into what handles its records, one function per format: fastavro's parsed
Avro schema, a JSON Schema validator, a Protobuf message class.

The output's encoders and the Kafka input's decoders both start from a schema's text; the rules
for what is accepted, and the refusal naming the schema and the fix, live here once.
"""

from __future__ import annotations

import json
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import ConfigError
from airflow_provider_kafka_eos.kafka.registry.config import protobuf_file_descriptor

__all__ = ["avro_schema", "json_schema_validator", "protobuf_message_class"]


def avro_schema(text: str, *, where: str) -> Any:
    """fastavro's parsed schema of ``text``; ``where`` names the schema in a refusal."""
    import fastavro
    from fastavro.schema import SchemaParseException

    try:
        return fastavro.parse_schema(json.loads(text))
    except (ValueError, TypeError, KeyError, SchemaParseException) as exc:
        raise ConfigError(f"{where}: the Avro schema does not parse ({_short(exc)})") from None


def json_schema_validator(text: str, *, where: str) -> tuple[Any, Any]:
    """(the JSON Schema as an object, a validator of its draft); an invalid schema is refused."""
    import jsonschema

    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{where}: the JSON Schema is not JSON ({_short(exc)})") from None
    validator_class = jsonschema.validators.validator_for(schema)
    try:
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ConfigError(f"{where}: the JSON Schema is invalid ({_short(exc)})") from None
    return schema, validator_class(schema)


def protobuf_message_class(text: str, *, where: str) -> Any:
    """The message class of the schema's first message (records use message index ``[0]``), built
    from its ``FileDescriptorProto`` in a pool of its own: no generated code or .proto compiler."""
    from google.protobuf import descriptor_pool, message_factory

    file_proto = protobuf_file_descriptor(text, where=where)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_proto)
    first = file_proto.message_type[0].name
    full_name = f"{file_proto.package}.{first}" if file_proto.package else first
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


def _short(exc: BaseException) -> str:
    return (str(exc).splitlines() or [""])[0][:200]
