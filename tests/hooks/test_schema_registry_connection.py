"""The ``kafka_eos_schema_registry`` connection: its form as Airflow's API server sends it, the
settings the hook reads back, and the Test button against the real registry (Apicurio, the
``schema_registry`` fixture) and against a URL nobody listens on."""

from __future__ import annotations

import json
import socket
import time

import pytest

from airflow_provider_kafka_eos.hooks import registry_form
from airflow_provider_kafka_eos.hooks.schema_registry import SchemaRegistryHook
from airflow_provider_kafka_eos.kafka.errors import ConfigError

SECRET = "registry-secret-that-must-not-leak"


def _conn(monkeypatch, conn_id: str, **fields) -> str:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}",
                       json.dumps({"conn_type": registry_form.REGISTRY_CONNECTION_TYPE, **fields}))
    return conn_id


@pytest.fixture(scope="module")
def registry_meta() -> dict:
    from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService

    metas = {m.connection_type: m for m in HookMetaService.hook_meta_data()}
    return metas[registry_form.REGISTRY_CONNECTION_TYPE].model_dump()


def test_the_form_has_the_url_tls_files_and_timeout_and_relabels_the_credentials(registry_meta):
    fields = registry_meta["extra_fields"]
    assert list(fields) == ["url", "ssl_ca_location", "ssl_certificate_location", "ssl_key_location",
                            "timeout_s"]
    for name, field in fields.items():
        assert field["schema"]["title"] and len(field["description"]) > 20, name
    assert fields["timeout_s"]["schema"]["type"] == ["integer", "null"]
    std = registry_meta["standard_fields"]
    assert std["host"]["hidden"] and std["port"]["hidden"]
    assert std["login"]["title"] == "Basic auth user"
    assert std["password"]["title"] == "Basic auth password, or bearer token"


def test_the_connection_type_resolves_to_the_hook():
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    hook = ProvidersManagerTaskRuntime().hooks[registry_form.REGISTRY_CONNECTION_TYPE]
    assert hook.hook_class_name == "airflow_provider_kafka_eos.hooks.schema_registry.SchemaRegistryHook"
    assert hook.connection_id_attribute_name == "schema_registry_conn_id"


def test_login_and_password_are_basic_auth_and_a_password_alone_is_a_bearer_token(monkeypatch, tmp_path):
    ca = tmp_path / "ca.pem"
    _conn(monkeypatch, "reg_basic", login="etl", password=SECRET,
          extra={"url": "https://registry.example.com:8081", "ssl_ca_location": str(ca),
                 "ssl_certificate_location": None, "ssl_key_location": None, "timeout_s": 3})
    config = SchemaRegistryHook("reg_basic").registry_config()
    assert (config.basic_auth_user, config.basic_auth_password, config.bearer_token) == ("etl", SECRET, None)
    assert config.ssl_ca_location == str(ca) and config.timeout_s == 3
    assert SECRET not in repr(config) and SECRET not in json.dumps(config.describe())
    _conn(monkeypatch, "reg_bearer", password=SECRET, extra={"url": "https://registry.example.com"})
    config = SchemaRegistryHook("reg_bearer").registry_config()
    assert (config.bearer_token, config.basic_auth_user) == (SECRET, None)
    assert config.describe()["auth"] == "bearer"


@pytest.mark.parametrize("extra, why", [
    ({}, "the registry URL (extra 'url') is not set"),
    ({"url": "registry:8081"}, "is not an http(s) URL"),
    ({"url": "https://r.example", "colour": "red"}, "unknown schema registry setting(s) colour"),
    ({"url": "https://r.example", "ssl_certificate_location": "/c.pem"}, "needs both"),
])
def test_a_bad_setting_is_refused_naming_the_connection(monkeypatch, extra, why):
    _conn(monkeypatch, "reg_bad", extra=extra)
    with pytest.raises(ConfigError, match="schema registry connection 'reg_bad'") as err:
        SchemaRegistryHook("reg_bad").registry_config()
    assert why in str(err.value)
    ok, message = SchemaRegistryHook("reg_bad").test_connection()
    assert not ok and why in message


def test_the_test_button_reaches_the_real_registry(schema_registry, monkeypatch):
    _conn(monkeypatch, "reg_live", extra={"url": schema_registry.url, "timeout_s": 5})
    ok, message = SchemaRegistryHook("reg_live").test_connection()
    assert ok, message
    assert message.startswith(f"Connected to schema registry {schema_registry.url} (auth: none): ")
    assert message.endswith("subject(s)")


def test_the_test_button_names_an_unreachable_registry(monkeypatch):
    with socket.socket() as sock:  # a loopback port nobody listens on (bound, then closed)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    _conn(monkeypatch, "reg_down", login="etl", password=SECRET,
          extra={"url": f"http://127.0.0.1:{port}", "timeout_s": 2})
    started = time.monotonic()
    ok, message = SchemaRegistryHook("reg_down").test_connection()
    assert not ok
    assert f"schema registry http://127.0.0.1:{port}: the registry is unreachable" in message
    assert "check the URL, that the registry runs" in message and SECRET not in message
    assert time.monotonic() - started < 15  # bounded by the timeout and retries, not minutes
