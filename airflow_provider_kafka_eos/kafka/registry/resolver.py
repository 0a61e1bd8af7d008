"""The schema id a checkpoint writes with, resolved once on the driver before any transaction opens.

Why once: every record of a checkpoint carries the same id, so a commit or a rerun of the
checkpoint writes exactly what was prepared (the id is recorded with the checkpoint and never
re-resolved), and the executors never call the registry (no registry call per record, no
registry outage in the middle of a prepared transaction).

The checks, in order, each failing with :class:`SchemaRegistryError` naming the subject, the
registry URL, the cause and the next step:

1. the subject exists, or ``auto_register`` allows creating it;
2. the writer's schema is compatible with the subject's latest version under the subject's
   compatibility rule (the registry's own check, ``POST /compatibility/...``);
3. the schema is registered under the subject (its id looked up), or ``auto_register`` registers it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import ConfigError, SchemaRegistryError
from airflow_provider_kafka_eos.kafka.registry.config import RegistryConfig, SerdeSetting, subject_name

__all__ = ["ResolvedSchema", "probe_registry", "registry_client", "registry_errors_translated",
           "resolve_schema"]

# The Confluent API's error codes (Apicurio's ccompat API answers the same).
_SUBJECT_NOT_FOUND = 40401
_SCHEMA_NOT_FOUND = 40403


@dataclasses.dataclass(frozen=True)
class ResolvedSchema:
    """The outcome of resolution: what the encoder needs on the executors and what the manifest
    records (no secret: the URL is shown without user info)."""

    format: str
    subject: str
    schema_id: int | None  # None only from a dry run: the schema would be registered
    schema: str
    registry_url: str
    is_key: bool = False

    def describe(self) -> dict[str, Any]:
        return {"format": self.format, "subject": self.subject, "schema_id": self.schema_id,
                "registry_url": self.registry_url}


def registry_client(config: RegistryConfig) -> Any:
    """confluent-kafka's ``SchemaRegistryClient`` for ``config`` (the ``[registry]`` extra)."""
    try:
        from confluent_kafka.schema_registry import SchemaRegistryClient
    except ImportError as exc:
        from airflow_provider_kafka_eos.kafka.errors import MissingExtraError

        raise MissingExtraError(
            f"record formats through a schema registry need confluent-kafka's registry client ({exc}); "
            "install the provider with its [registry] extra: "
            "pip install 'airflow-provider-kafka-eos[registry]'"
        ) from exc
    try:
        return SchemaRegistryClient(config.client_conf())
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"schema registry {config.display_url}: {exc}") from None


def resolve_schema(config: RegistryConfig, setting: SerdeSetting, topic: str, *, is_key: bool = False,
                   client: Any = None, dry_run: bool = False) -> ResolvedSchema:
    """Check ``setting``'s schema against the registry and return the id to write with.

    ``dry_run`` (preflight) changes nothing on the registry: where the schema would be registered,
    the result's ``schema_id`` is ``None``."""
    if not setting.uses_registry:
        raise ConfigError(f"topic {topic!r}: format 'bytes' has no schema to resolve")
    from confluent_kafka.schema_registry import Schema

    client = client or registry_client(config)
    subject = subject_name(setting.subject_name_strategy, topic, is_key=is_key,
                           record_name=setting.record_name())
    schema = Schema(setting.schema, setting.format.registry_type)
    where = f"subject {subject!r} on schema registry {config.display_url}"

    with registry_errors_translated(config, subject):
        exists = _subject_exists(client, subject)
        if not exists and not setting.auto_register:
            raise SchemaRegistryError(
                f"{where}: the subject does not exist and registration is off; register the writer's "
                f"schema under {subject!r} (or set auto_register=True to let the pipeline register it)"
            )
        if exists and not client.test_compatibility(subject, schema):
            rule = _compatibility_rule(client, subject)
            raise SchemaRegistryError(
                f"{where}: the writer's schema is incompatible with the subject's latest version under its "
                f"compatibility rule ({rule}); nothing was prepared. Change the schema so that it is "
                "compatible (e.g. give new fields defaults), or change the subject's rule with the "
                "consumers' owners"
            )
        schema_id = _registered_id(client, subject, schema)
        if schema_id is None:
            if not setting.auto_register:
                raise SchemaRegistryError(
                    f"{where}: the writer's schema is compatible but not registered under the subject and "
                    "registration is off; register it (or set auto_register=True)"
                )
            if not dry_run:
                schema_id = client.register_schema(subject, schema)
    return ResolvedSchema(format=setting.format.value, subject=subject,
                          schema_id=None if schema_id is None else int(schema_id),
                          schema=setting.schema or "", registry_url=config.display_url, is_key=is_key)


def probe_registry(config: RegistryConfig, *, client: Any = None) -> int:
    """One authenticated call (the subject list): the registry answers with these settings. Returns
    how many subjects it holds; a refusal is a :class:`SchemaRegistryError` naming URL and cause."""
    client = client or registry_client(config)
    with registry_errors_translated(config, None):
        return len(client.get_subjects())


def _subject_exists(client: Any, subject: str) -> bool:
    from confluent_kafka.schema_registry.error import SchemaRegistryError as ClientError

    try:
        client.get_versions(subject)
    except ClientError as exc:
        if exc.error_code == _SUBJECT_NOT_FOUND or exc.http_status_code == 404:
            return False
        raise
    return True


def _registered_id(client: Any, subject: str, schema: Any) -> int | None:
    from confluent_kafka.schema_registry.error import SchemaRegistryError as ClientError

    try:
        return client.lookup_schema(subject, schema).schema_id
    except ClientError as exc:
        if exc.error_code in (_SUBJECT_NOT_FOUND, _SCHEMA_NOT_FOUND) or exc.http_status_code == 404:
            return None
        raise


def _compatibility_rule(client: Any, subject: str) -> str:
    from confluent_kafka.schema_registry.error import SchemaRegistryError as ClientError

    for name in (subject, None):
        try:
            rule = client.get_compatibility(name)
            return rule + (" for the subject" if name else ", the registry's default")
        except ClientError:
            continue
    return "unknown"


class registry_errors_translated:
    """Turns the client's errors into the provider's, naming subject (or the schema id a Kafka-input
    record names), URL, cause and next step."""

    def __init__(self, config: RegistryConfig, subject: str | None, *, schema_id: int | None = None) -> None:
        about = (f"subject {subject!r} on " if subject
                 else f"schema id {schema_id} on " if schema_id is not None else "")
        self.where = about + f"schema registry {config.display_url}"

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, exc: BaseException | None, _tb: Any) -> bool:
        if exc is None or isinstance(exc, SchemaRegistryError | ConfigError):
            return False
        from confluent_kafka.schema_registry.error import SchemaRegistryError as ClientError

        if isinstance(exc, ClientError):
            status = exc.http_status_code
            if status in (401, 403):
                raise SchemaRegistryError(
                    f"{self.where}: the registry refused the credentials (HTTP {status}); check the "
                    "registry connection's user/password or token and its permissions"
                ) from None
            if status == 422:
                raise SchemaRegistryError(
                    f"{self.where}: the registry rejected the writer's schema as invalid "
                    f"({exc.error_message}); fix the schema text"
                ) from None
            raise SchemaRegistryError(
                f"{self.where}: the registry answered HTTP {status} ({exc.error_message}); check the URL "
                "points at the registry's Confluent-compatible API"
            ) from None
        if _is_tls_error(exc):
            raise SchemaRegistryError(
                f"{self.where}: the TLS handshake failed ({type(exc).__name__}: {_short(exc)}); check "
                "ssl_ca_location (the CA that signed the registry's certificate) and the client certificate"
            ) from None
        if isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in ("httpx", "httpcore", "httpx2"):
            raise SchemaRegistryError(
                f"{self.where}: the registry is unreachable ({type(exc).__name__}: {_short(exc)}); check "
                "the URL, that the registry runs, and that this host may reach it"
            ) from None
        return False


def _is_tls_error(exc: BaseException) -> bool:
    import ssl

    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLError) or "CERTIFICATE_VERIFY_FAILED" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _short(exc: BaseException) -> str:
    return (str(exc).splitlines() or [""])[0][:200]
