"""The resolution form's manifest store comes from the hook's one rule, not a fallback of its own.

The form's ``manifest_base_uri`` field, else the connection's: ``KafkaEosHook.manifest_store_setting``
decides, as for every other task, and so the form's own store gets its credentials the same way
(before, the form's URI was taken as it stood and an ``s3://`` store named there was opened
without the connection's store credentials).
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
from airflow_provider_kafka_eos.kafka.errors import ConfigError
from airflow_provider_kafka_eos.operators.resolve import request_from_form


def _conn(monkeypatch, conn_id: str, extra: dict) -> None:
    connection = {"conn_type": "kafka_eos", "extra": extra}
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(connection))


def test_the_form_store_else_the_connection_store_by_the_hook_rule(monkeypatch, tmp_path):
    _conn(monkeypatch, "eos_form", {"bootstrap.servers": "b:9092", "manifest_base_uri": f"{tmp_path}/conn"})
    setting = KafkaEosHook("eos_form").manifest_store_setting
    blank = request_from_form({"action": "list", "manifest_base_uri": " "}, store_setting=setting)
    assert blank.manifest_base_uri == f"{tmp_path}/conn"
    form = {"action": "list", "manifest_base_uri": f"{tmp_path}/form"}
    given = request_from_form(form, store_setting=setting)
    assert given.manifest_base_uri == f"{tmp_path}/form"


def test_the_form_store_gets_its_credentials_from_the_connection(monkeypatch):
    """An ``s3://`` store typed into the form is reached the way the operator reaches it (the hook's
    ``store_access`` for the request's URI), which reads the connection's ``manifest_store_conn_id``:
    naming a connection that does not exist is refused."""
    extra = {"bootstrap.servers": "b:9092", "manifest_store_conn_id": "no_such_conn"}
    _conn(monkeypatch, "eos_form_s3", extra)
    hook = KafkaEosHook("eos_form_s3")
    request = request_from_form({"action": "abort", "manifest_base_uri": "s3://bucket/m"},
                                store_setting=hook.manifest_store_setting)
    assert request.manifest_base_uri == "s3://bucket/m"
    with pytest.raises(ConfigError, match="no_such_conn"):
        hook.store_access(request.manifest_uri or request.manifest_base_uri)
