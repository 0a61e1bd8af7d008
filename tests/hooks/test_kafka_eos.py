"""KafkaEosHook.client_config from real Airflow connections given as AIRFLOW_CONN_<ID> JSON."""

from __future__ import annotations

import json
import logging

import pytest

from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
from airflow_provider_kafka_eos.kafka.errors import ConfigError

SECRET = "pa55-word-that-must-not-leak"


def _conn(monkeypatch, conn_id: str, **fields) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kafka_eos", **fields}))


def test_kafka_connection_extra_shape_is_used_as_is(monkeypatch):
    _conn(
        monkeypatch,
        "eos_extra",
        extra={
            "bootstrap.servers": "b1:9092,b2:9093",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "etl",
            "sasl.password": SECRET,
        },
    )
    config = KafkaEosHook("eos_extra").client_config()
    assert config.bootstrap_servers == "b1:9092,b2:9093"
    assert config.confluent()["sasl.password"] == SECRET
    assert SECRET not in repr(config) and SECRET not in json.dumps(config.redacted())


def test_host_and_port_fill_in_missing_bootstrap_servers(monkeypatch):
    _conn(monkeypatch, "eos_host", host="broker.internal", port=19092, extra={"client.id": "etl"})
    assert KafkaEosHook("eos_host").client_config().bootstrap_servers == "broker.internal:19092"
    _conn(monkeypatch, "eos_host_default", host="broker.internal")
    assert KafkaEosHook("eos_host_default").client_config().bootstrap_servers == "broker.internal:9092"


def test_login_password_fallback_for_sasl(monkeypatch):
    _conn(
        monkeypatch,
        "eos_login",
        host="b",
        port=9092,
        login="etl",
        password=SECRET,
        extra={"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
    )
    settings = KafkaEosHook("eos_login").client_config().confluent()
    assert settings["sasl.username"] == "etl" and settings["sasl.password"] == SECRET


def test_unknown_key_names_the_key_and_the_connection(monkeypatch):
    _conn(monkeypatch, "eos_bad", extra={"bootstrap.servers": "b:9092", "bootstrap.server": "typo:1"})
    with pytest.raises(ConfigError) as err:
        KafkaEosHook("eos_bad").client_config()
    assert "'bootstrap.server'" in str(err.value) and "eos_bad" in str(err.value)


def test_secrets_are_registered_with_the_masker_and_never_logged(monkeypatch, caplog):
    from airflow.sdk._shared.secrets_masker import redact

    other = "oauth-client-secret-value-xyz"
    _conn(
        monkeypatch,
        "eos_mask",
        extra={
            "bootstrap.servers": "b:9092",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "etl",
            "sasl.password": SECRET,
            "sasl.oauthbearer.client.secret": other,
        },
    )
    with caplog.at_level(logging.INFO):
        KafkaEosHook("eos_mask").client_config()
    assert SECRET not in caplog.text and other not in caplog.text
    assert redact(f"leak {SECRET} and {other}") == "leak *** and ***"


def test_test_connection_reports_unreachable_without_secrets(monkeypatch):
    _conn(
        monkeypatch,
        "eos_down",
        extra={
            "bootstrap.servers": "127.0.0.1:1",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "etl",
            "sasl.password": SECRET,
        },
    )
    ok, message = KafkaEosHook("eos_down", connect_timeout_ms=1500).test_connection()
    assert not ok
    assert "127.0.0.1:1" in message and "broker-unreachable" in message and SECRET not in message


def test_manifest_store_rule_argument_else_connection_once_in_the_hook(monkeypatch, tmp_path):
    """The rule every task uses (submit, abort, the lingering scan): the operator's argument, else
    the connection's ``manifest_base_uri``; with neither, an error naming the connection's setting."""
    from airflow_provider_kafka_eos.kafka.errors import ManifestStoreError

    store = {"bootstrap.servers": "b:9092", "manifest_base_uri": f"{tmp_path}/c"}
    _conn(monkeypatch, "eos_store", extra=store)
    _conn(monkeypatch, "eos_bare", extra={"bootstrap.servers": "b:9092"})
    hook = KafkaEosHook("eos_store")
    assert hook.manifest_store_setting(f"{tmp_path}/arg") == (f"{tmp_path}/arg", "manifest_base_uri")
    assert hook.manifest_store_setting(None) == (
        f"{tmp_path}/c", "manifest_base_uri in the extra of connection 'eos_store'"
    )
    assert hook.manifest_store().base_uri == f"{tmp_path}/c"
    assert hook.manifest_store(f"{tmp_path}/arg/").base_uri == f"{tmp_path}/arg"
    assert KafkaEosHook("eos_bare").manifest_store(f"{tmp_path}/arg").base_uri == f"{tmp_path}/arg"
    with pytest.raises(ManifestStoreError, match="manifest_base_uri in the extra of connection 'eos_bare'"):
        KafkaEosHook("eos_bare").manifest_store()
