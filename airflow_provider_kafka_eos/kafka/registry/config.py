"""What a pipeline says about its record format: the registry connection, the format of its key
and value, and how the subject is named.

Kept as plain frozen dataclasses of strings so that the driver can ship them to the executors
(pickled with the job's arguments) and the manifest can record them; the registry's secrets are
fields with ``repr=False`` and never part of :meth:`RegistryConfig.describe`.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import urllib.parse
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import ConfigError

__all__ = [
    "RecordFormat", "RecordFormats", "RegistryConfig", "SerdeSetting", "SubjectNameStrategy",
    "protobuf_file_descriptor", "protobuf_schema", "subject_name",
]


class RecordFormat(str, enum.Enum):
    """How a key or value is encoded: ``bytes`` (the column's bytes as they are, the default) or a
    Schema Registry format in the Confluent wire format."""

    BYTES = "bytes"
    AVRO = "avro"
    PROTOBUF = "protobuf"
    JSON_SCHEMA = "json_schema"

    @property
    def registry_type(self) -> str:
        """The registry's name for the schema type (``schemaType`` in its API)."""
        return {"avro": "AVRO", "protobuf": "PROTOBUF", "json_schema": "JSON"}[self.value]


class SubjectNameStrategy(str, enum.Enum):
    """The subject a schema is registered under, as Kafka's serializers name it:
    ``topic`` (TopicNameStrategy, ``<topic>-key`` / ``<topic>-value``), ``record``
    (RecordNameStrategy, the record's full name) and ``topic_record`` (``<topic>-<full name>``)."""

    TOPIC = "topic"
    RECORD = "record"
    TOPIC_RECORD = "topic_record"


def subject_name(strategy: SubjectNameStrategy | str, topic: str, *, is_key: bool,
                 record_name: str | None) -> str:
    """The subject under ``strategy``; ``record_name`` is the schema's full name (Avro
    ``namespace.name``, Protobuf ``package.Message``, JSON Schema ``title``)."""
    strategy = SubjectNameStrategy(strategy)
    if strategy is SubjectNameStrategy.TOPIC:
        return f"{topic}-{'key' if is_key else 'value'}"
    if not record_name:
        raise ConfigError(
            f"subject name strategy {strategy.value!r} needs the schema's record name, and the schema for "
            f"topic {topic!r} has none (Avro: a named record; JSON Schema: a \"title\"); "
            "name the record or use subject_name_strategy='topic'"
        )
    return record_name if strategy is SubjectNameStrategy.RECORD else f"{topic}-{record_name}"


@dataclasses.dataclass(frozen=True)
class RegistryConfig:
    """A Schema Registry connection: the URL of its Confluent-compatible API, basic auth or a bearer
    token, and TLS files (a CA bundle, a client certificate and key).

    ``timeout_s`` bounds each request and ``max_retries`` the retries of one that failed at the
    network level, so that an unreachable registry fails the check in seconds, not minutes.
    """

    url: str
    basic_auth_user: str | None = None
    basic_auth_password: str | None = dataclasses.field(default=None, repr=False)
    bearer_token: str | None = dataclasses.field(default=None, repr=False)
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = dataclasses.field(default=None, repr=False)
    timeout_s: float = 10.0
    max_retries: int = 1

    def __post_init__(self) -> None:
        parsed = urllib.parse.urlsplit(self.url or "")
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ConfigError(f"schema registry url {self.display_url!r} is not an http(s) URL; "
                              "give e.g. https://registry.example.com:8081")
        if parsed.username or parsed.password:
            raise ConfigError(f"schema registry url {self.display_url!r} carries credentials; give them as "
                              "basic_auth_user / basic_auth_password so that they stay out of logs")
        if self.bearer_token and (self.basic_auth_user or self.basic_auth_password):
            raise ConfigError(f"schema registry {self.display_url}: both basic auth and a bearer token are "
                              "set; keep one")
        if bool(self.basic_auth_user) != bool(self.basic_auth_password):
            raise ConfigError(f"schema registry {self.display_url}: basic auth needs both a user and a "
                              "password")
        if bool(self.ssl_certificate_location) != bool(self.ssl_key_location):
            raise ConfigError(f"schema registry {self.display_url}: a client certificate needs both "
                              "ssl_certificate_location and ssl_key_location")

    @property
    def display_url(self) -> str:
        """The URL without any user info (safe in an error message)."""
        parsed = urllib.parse.urlsplit(self.url or "")
        host = parsed.hostname or ""
        netloc = host + (f":{parsed.port}" if parsed.port else "")
        return urllib.parse.urlunsplit((parsed.scheme, netloc, parsed.path, "", "")) or repr(self.url)

    def client_conf(self) -> dict[str, Any]:
        """confluent-kafka's ``SchemaRegistryClient`` configuration (holds the secrets: never log it)."""
        conf: dict[str, Any] = {"url": self.url, "timeout": self.timeout_s, "max.retries": self.max_retries,
                                "retries.wait.ms": 200, "retries.max.wait.ms": 1000}
        if self.basic_auth_user:
            conf["basic.auth.user.info"] = f"{self.basic_auth_user}:{self.basic_auth_password}"
        if self.bearer_token:
            conf["bearer.auth.credentials.source"] = "STATIC_TOKEN"
            conf["bearer.auth.token"] = self.bearer_token
            # the client requires both; a plain (non-Confluent-Cloud) registry ignores them
            conf["bearer.auth.logical.cluster"] = "-"
            conf["bearer.auth.identity.pool.id"] = "-"
        for key in ("ssl_ca_location", "ssl_certificate_location", "ssl_key_location", "ssl_key_password"):
            if getattr(self, key):
                conf[key.replace("_", ".")] = getattr(self, key)
        return conf

    def describe(self) -> dict[str, Any]:
        """What a manifest or a report may show: the URL and which auth, never a secret."""
        auth = "basic" if self.basic_auth_user else "bearer" if self.bearer_token else "none"
        return {"url": self.display_url, "auth": auth,
                "tls_client_certificate": bool(self.ssl_certificate_location)}

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> RegistryConfig:
        """From a dict (a connection's extra, a DAG's argument); unknown keys are refused by name."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown schema registry setting(s) {', '.join(unknown)}; known: "
                              f"{', '.join(sorted(known))}")
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class SerdeSetting:
    """The format of a key or a value: the format, the writer's schema (the schema text as the
    registry stores it), the subject naming strategy, and whether a missing subject or an
    unregistered (compatible) schema may be registered by the pipeline (off by default: teams
    usually register schemas through their own review, and a pipeline must not invent one)."""

    format: RecordFormat = RecordFormat.BYTES
    schema: str | None = None
    subject_name_strategy: SubjectNameStrategy = SubjectNameStrategy.TOPIC
    auto_register: bool = False

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "format", RecordFormat(self.format))
        except ValueError:
            raise ConfigError(f"unknown record format {self.format!r}; use one of "
                              f"{', '.join(f.value for f in RecordFormat)}") from None
        try:
            object.__setattr__(self, "subject_name_strategy", SubjectNameStrategy(self.subject_name_strategy))
        except ValueError:
            raise ConfigError(f"unknown subject name strategy {self.subject_name_strategy!r}; use one of "
                              f"{', '.join(s.value for s in SubjectNameStrategy)}") from None
        if self.format is not RecordFormat.BYTES and not self.schema:
            raise ConfigError(f"record format {self.format.value!r} needs the writer's schema (schema=...)")
        if self.format is RecordFormat.BYTES and self.schema:
            raise ConfigError("a schema was given with record format 'bytes'; set the format "
                              "(avro, protobuf or json_schema) or drop the schema")

    @property
    def uses_registry(self) -> bool:
        return self.format is not RecordFormat.BYTES

    def record_name(self) -> str | None:
        """The schema's full name, for the record and topic-record strategies."""
        if self.format is RecordFormat.AVRO:
            parsed = json.loads(self.schema or "null")
            if isinstance(parsed, dict) and parsed.get("name"):
                name = parsed["name"]
                namespace = parsed.get("namespace")
                return name if "." in name or not namespace else f"{namespace}.{name}"
            return None
        if self.format is RecordFormat.JSON_SCHEMA:
            parsed = json.loads(self.schema or "null")
            return parsed.get("title") if isinstance(parsed, dict) else None
        if self.format is RecordFormat.PROTOBUF:
            file_proto = protobuf_file_descriptor(self.schema or "", where="the protobuf format setting")
            first = file_proto.message_type[0].name
            return f"{file_proto.package}.{first}" if file_proto.package else first
        return None


def protobuf_schema(message_class: Any) -> str:
    """The schema text of a generated Protobuf message class, as confluent-kafka's
    ``ProtobufSerializer`` registers it: the base64 of its file's ``FileDescriptorProto``.

    The message must be the file's first message (it is encoded with message index ``[0]``) and the
    file may import nothing: both are refused by :func:`protobuf_file_descriptor`."""
    import base64

    descriptor = message_class.DESCRIPTOR
    schema = base64.standard_b64encode(descriptor.file.serialized_pb).decode("ascii")
    file_proto = protobuf_file_descriptor(schema, where=f"protobuf message {descriptor.full_name}")
    if file_proto.message_type[0].name != descriptor.name:
        raise ConfigError(f"protobuf message {descriptor.full_name} is not the first message of "
                          f"{descriptor.file.name}; move it first (records are written with message "
                          "index [0])")
    return schema


def protobuf_file_descriptor(schema: str, *, where: str) -> Any:
    """The ``FileDescriptorProto`` of a base64 protobuf schema (what :func:`protobuf_schema` gives)."""
    import base64
    import binascii

    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    file_proto = descriptor_pb2.FileDescriptorProto()
    try:
        file_proto.ParseFromString(base64.b64decode(schema.encode("ascii"), validate=True))
    except (binascii.Error, UnicodeEncodeError, DecodeError):
        raise ConfigError(
            f"{where}: the protobuf schema is not a base64 FileDescriptorProto (.proto text cannot be "
            "compiled here); pass protobuf_schema(YourMessage) from "
            "airflow_provider_kafka_eos.kafka.registry.config"
        ) from None
    if not file_proto.message_type:
        raise ConfigError(f"{where}: the protobuf schema {file_proto.name!r} defines no message")
    if list(file_proto.dependency):
        raise ConfigError(f"{where}: the protobuf schema {file_proto.name!r} imports "
                          f"{', '.join(file_proto.dependency)}; schemas with imports (references) are not "
                          "supported yet: inline the imported messages")
    return file_proto


@dataclasses.dataclass(frozen=True)
class RecordFormats:
    """A pipeline's output formats: its key's and value's, and the registry they resolve against
    (needed as soon as either is not ``bytes``)."""

    key: SerdeSetting = dataclasses.field(default_factory=SerdeSetting)
    value: SerdeSetting = dataclasses.field(default_factory=SerdeSetting)
    registry: RegistryConfig | None = None

    def __post_init__(self) -> None:
        for name in ("key", "value"):
            setting = getattr(self, name)
            if isinstance(setting, dict):
                object.__setattr__(self, name, SerdeSetting(**setting))
            elif isinstance(setting, str | RecordFormat):
                object.__setattr__(self, name, SerdeSetting(format=setting))
        if isinstance(self.registry, dict):
            object.__setattr__(self, "registry", RegistryConfig.from_mapping(self.registry))
        if self.uses_registry and self.registry is None:
            formats = ", ".join(f"{n} {getattr(self, n).format.value}" for n in ("key", "value")
                                if getattr(self, n).uses_registry)
            raise ConfigError(f"record formats ({formats}) need a schema registry connection "
                              "(schema_registry=...)")

    @property
    def uses_registry(self) -> bool:
        return self.key.uses_registry or self.value.uses_registry

