"""SchemaRegistryHook: an Airflow ``kafka_eos_schema_registry`` connection -> the registry's settings.

The pipelines' record formats (Avro, Protobuf, JSON Schema in the Confluent wire format) resolve
their schema ids against this registry. The connection holds what reaching it takes: the URL, basic
auth or a bearer token (the standard login/password fields, ``hooks/registry_form.py``), TLS files
and a request timeout. The secrets are registered with Airflow's secrets masker as they are read and
never leave the worker except in the submit operator's private file (``spark/handoff.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_provider_kafka_eos.hooks import connection_form as form
from airflow_provider_kafka_eos.hooks import registry_form

if TYPE_CHECKING:
    from airflow_provider_kafka_eos.kafka.registry.config import RecordFormats, RegistryConfig

__all__ = ["REGISTRY_CONN_ID_KEY", "SchemaRegistryHook", "checked_formats", "output_formats"]

# The operators' ``record_formats`` key naming the registry connection.
REGISTRY_CONN_ID_KEY = "schema_registry_conn_id"


class SchemaRegistryHook(BaseHook):
    """A ``kafka_eos_schema_registry`` connection -> :class:`RegistryConfig`; never logs a secret."""

    conn_name_attr = "schema_registry_conn_id"
    default_conn_name = "kafka_eos_schema_registry_default"
    conn_type = registry_form.REGISTRY_CONNECTION_TYPE
    hook_name = registry_form.REGISTRY_HOOK_NAME

    def __init__(self, schema_registry_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.schema_registry_conn_id = schema_registry_conn_id

    def registry_config(self) -> RegistryConfig:
        """The connection's settings, validated (ConfigError names the connection and the field)."""
        from airflow_provider_kafka_eos.kafka.errors import ConfigError
        from airflow_provider_kafka_eos.kafka.registry.config import RegistryConfig

        conn = self.get_connection(self.schema_registry_conn_id)
        source = f"schema registry connection {self.schema_registry_conn_id!r}"
        try:
            extra = conn.extra_dejson
        except Exception:
            raise ConfigError(f"{source}: the extra is not a JSON object") from None
        if not isinstance(extra, dict):
            raise ConfigError(f"{source}: the extra must be a JSON object, got {type(extra).__name__}")
        values = {k: v for k, v in extra.items() if not form.blank(v)}
        if conn.password:
            _mask(conn.password)
            values["basic_auth_password" if conn.login else "bearer_token"] = conn.password
        if conn.login:
            values["basic_auth_user"] = conn.login
        if form.blank(values.get(registry_form.URL_KEY)):
            raise ConfigError(f"{source}: the registry URL (extra 'url') is not set; give the base URL of "
                              "its Confluent-compatible API, e.g. https://registry.example.com:8081")
        for secret in ("basic_auth_password", "bearer_token", "ssl_key_password"):
            if secret in extra and not form.blank(extra[secret]):
                _mask(extra[secret])
        try:
            return RegistryConfig.from_mapping(values)
        except ConfigError as err:
            raise ConfigError(f"{source}: {err.cause}") from None
        except (TypeError, ValueError) as err:
            raise ConfigError(f"{source}: {err}") from None

    def get_conn(self) -> RegistryConfig:
        return self.registry_config()

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """Airflow 3.1's connection form (3.2+ reads provider info's ``conn-fields`` instead)."""
        return form.form_widgets(registry_form.REGISTRY_FIELDS)

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return form.ui_field_behaviour(registry_form.REGISTRY_UI_FIELD_BEHAVIOUR)

    def test_connection(self) -> tuple[bool, str]:
        """Airflow's "Test" button: the settings, then one authenticated call (the subject list)."""
        from airflow_provider_kafka_eos.kafka.errors import KafkaEosError
        from airflow_provider_kafka_eos.kafka.registry.resolver import probe_registry

        try:
            config = self.registry_config()
            subjects = probe_registry(config)
        except KafkaEosError as err:
            return False, str(err)
        except Exception as err:
            return False, f"{type(err).__name__} while reaching the registry (details withheld: they may " \
                          "contain settings)"
        auth = config.describe()["auth"]
        return True, (f"Connected to schema registry {config.display_url} (auth: {auth}): "
                      f"{subjects} subject(s)")


def checked_formats(record_formats: Mapping[str, Any] | None) -> tuple[Any, str]:
    """An operator's ``record_formats`` checked (unknown keys, formats, schemas, the input's policy)
    without reading a connection: ``((RecordFormats with a placeholder registry, the input's
    mapping or None) or None, the registry connection id)``; None when no part uses a registry."""
    from airflow_provider_kafka_eos.kafka.errors import UsageError
    from airflow_provider_kafka_eos.kafka.registry.config import RecordFormats, RegistryConfig
    from airflow_provider_kafka_eos.kafka.registry.decoder import input_settings

    spec = dict(record_formats or {})
    unknown = sorted(set(spec) - {"key", "value", "input", REGISTRY_CONN_ID_KEY})
    if unknown:
        raise UsageError(f"record_formats: unknown key(s) {', '.join(unknown)}; known: key, value, input, "
                         f"{REGISTRY_CONN_ID_KEY} (the registry's settings live in that connection)")
    conn_id = str(spec.pop(REGISTRY_CONN_ID_KEY, None) or SchemaRegistryHook.default_conn_name)
    # a placeholder registry: the settings are checked now, the connection is read when it is used
    formats = RecordFormats(key=spec.get("key", "bytes"), value=spec.get("value", "bytes"),
                            registry=RegistryConfig("http://checked.invalid"))
    inputs = input_settings(spec["input"]) if "input" in spec else {}
    used = formats.uses_registry or any(s.uses_registry for s in inputs.values())
    return ((formats, spec.get("input")) if used else None), conn_id


def output_formats(record_formats: Mapping[str, Any] | None) -> RecordFormats | None:
    """The output's ``RecordFormats`` with the registry connection's settings (preflight's), or None."""
    import dataclasses

    checked, conn_id = checked_formats(record_formats)
    if checked is None or not checked[0].uses_registry:
        return None
    return dataclasses.replace(checked[0], registry=SchemaRegistryHook(conn_id).registry_config())


def _mask(value: Any) -> None:
    """Register ``value`` with the secrets masker (by value: the key names are not all sensitive)."""
    from airflow.sdk.log import mask_secret

    mask_secret(value)
