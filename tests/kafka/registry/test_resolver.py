"""Schema resolution against a real Confluent-compatible registry (Apicurio, the schema_registry
fixture): the subject, the compatibility rule and the id a checkpoint writes with."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time

import pytest

from airflow_provider_kafka_eos.kafka.errors import SchemaRegistryError
from airflow_provider_kafka_eos.kafka.registry.config import RegistryConfig, SerdeSetting
from airflow_provider_kafka_eos.kafka.registry.resolver import registry_client, resolve_schema

pytest.importorskip("confluent_kafka.schema_registry")


def _avro(*extra_fields: dict) -> str:
    return json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                       "fields": [{"name": "id", "type": "long"}, *extra_fields]})


def _register(config: RegistryConfig, subject: str, schema: str, rule: str = "BACKWARD") -> int:
    """The subject as a team's own review would set it up: a first version and a rule."""
    from confluent_kafka.schema_registry import Schema

    client = registry_client(config)
    schema_id = client.register_schema(subject, Schema(schema, "AVRO"))
    client.set_compatibility(subject, rule)
    return schema_id


def test_a_registered_schema_resolves_to_its_id(schema_registry, registry_topic):
    config = RegistryConfig(schema_registry.url)
    schema_id = _register(config, f"{registry_topic}-value", _avro())
    resolved = resolve_schema(config, SerdeSetting(format="avro", schema=_avro()), registry_topic)
    assert (resolved.subject, resolved.schema_id) == (f"{registry_topic}-value", schema_id)
    assert resolved.describe()["registry_url"] == schema_registry.url


def test_a_missing_subject_is_refused_with_registration_off(schema_registry, registry_topic):
    config = RegistryConfig(schema_registry.url)
    with pytest.raises(SchemaRegistryError) as err:
        resolve_schema(config, SerdeSetting(format="avro", schema=_avro()), registry_topic, is_key=True)
    message = str(err.value)
    assert f"subject '{registry_topic}-key'" in message and schema_registry.url in message
    assert "does not exist and registration is off" in message and "auto_register=True" in message
    assert f"{registry_topic}-key" not in registry_client(config).get_subjects()  # nothing registered


def test_registration_on_registers_a_new_subject_and_a_compatible_version(schema_registry, registry_topic):
    config = RegistryConfig(schema_registry.url)
    setting = SerdeSetting(format="avro", schema=_avro(), auto_register=True)
    first = resolve_schema(config, setting, registry_topic)
    registry_client(config).set_compatibility(first.subject, "BACKWARD")
    evolved = _avro({"name": "note", "type": ["null", "string"], "default": None})
    with pytest.raises(SchemaRegistryError, match="compatible but not registered"):
        resolve_schema(config, SerdeSetting(format="avro", schema=evolved), registry_topic)
    second = resolve_schema(config, SerdeSetting(format="avro", schema=evolved, auto_register=True),
                            registry_topic)
    assert second.schema_id != first.schema_id
    assert registry_client(config).get_versions(first.subject) == [1, 2]


def test_an_incompatible_schema_is_refused_under_the_subjects_rule(schema_registry, registry_topic):
    config = RegistryConfig(schema_registry.url)
    subject = f"{registry_topic}-value"
    _register(config, subject, _avro())
    # a new field without a default: BACKWARD-incompatible (new readers cannot read old records)
    breaking = _avro({"name": "amount", "type": "double"})
    with pytest.raises(SchemaRegistryError) as err:
        resolve_schema(config, SerdeSetting(format="avro", schema=breaking, auto_register=True),
                       registry_topic)
    assert "incompatible" in str(err.value) and "BACKWARD for the subject" in str(err.value)
    assert registry_client(config).get_versions(subject) == [1]  # registration on, still nothing registered


def test_the_record_strategy_names_the_subject_after_the_record(schema_registry, registry_topic):
    config = RegistryConfig(schema_registry.url)
    schema = json.dumps({"type": "record", "name": "Rec", "namespace": registry_topic.replace("-", "_"),
                         "fields": [{"name": "id", "type": "long"}]})
    resolved = resolve_schema(config, SerdeSetting(format="avro", schema=schema, auto_register=True,
                                                   subject_name_strategy="topic_record"), registry_topic)
    assert resolved.subject == f"{registry_topic}-{registry_topic.replace('-', '_')}.Rec"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_registry_fails_fast_naming_the_url():
    url = f"http://127.0.0.1:{_closed_port()}/apis/ccompat/v7"
    started = time.monotonic()
    with pytest.raises(SchemaRegistryError) as err:
        resolve_schema(RegistryConfig(url, timeout_s=2), SerdeSetting(format="avro", schema=_avro()),
                       "orders")
    assert time.monotonic() - started < 10
    assert f"schema registry {url}" in str(err.value) and "unreachable" in str(err.value)


class _RefusingRegistry(http.server.BaseHTTPRequestHandler):
    """Answers 401 as a registry with authentication does to wrong credentials."""

    def do_GET(self) -> None:
        body = json.dumps({"error_code": 40101, "message": "Unauthorized"}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_wrong_credentials_are_named_without_the_secret():
    # Boundary: Apicurio checks credentials only with an OIDC server beside it, which this suite
    # does not run; a loopback HTTP server answers 401 as such a registry does.
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RefusingRegistry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        config = RegistryConfig(url, basic_auth_user="svc", basic_auth_password="wrong-pw-123")
        with pytest.raises(SchemaRegistryError) as err:
            resolve_schema(config, SerdeSetting(format="avro", schema=_avro()), "orders")
    finally:
        server.shutdown()
        server.server_close()
    assert "refused the credentials (HTTP 401)" in str(err.value) and "wrong-pw-123" not in str(err.value)
