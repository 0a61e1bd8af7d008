"""The ``kafka_eos_schema_registry`` connection form: a Schema Registry as the pipelines reach it.

Plain data (no Airflow import), read by ``get_provider_info`` while Airflow discovers providers and
rendered by ``hooks/connection_form.py``'s builders, as the ``kafka_eos`` form is. Each field's name
is its key in the connection's ``extra`` and a ``RegistryConfig`` setting
(``kafka/registry/config.py``); the credentials are the standard login/password fields (the
password column is encrypted and masked, unlike the extra): a user and a password are HTTP basic
auth, a password with the user left blank is a bearer token.
"""

from __future__ import annotations

from typing import Any

REGISTRY_CONNECTION_TYPE = "kafka_eos_schema_registry"
REGISTRY_HOOK_NAME = "Schema Registry (Kafka exactly-once)"
URL_KEY = "url"
TIMEOUT_KEY = "timeout_s"

# name -> (label, JSON schema, description), in the form's order; the names are RegistryConfig's.
REGISTRY_FIELDS: dict[str, tuple[str, dict[str, Any], str]] = {
    URL_KEY: (
        "Registry URL",
        {"type": ["string", "null"], "examples": ["https://registry.example.com:8081",
                                                  "http://apicurio:8080/apis/ccompat/v7"]},
        "Required. The base URL of the registry's Confluent-compatible API (what confluent-kafka's "
        "SchemaRegistryClient is given). Credentials go in the user/password fields, never in the URL.",
    ),
    "ssl_ca_location": (
        "TLS CA file",
        {"type": ["string", "null"], "examples": ["/etc/registry/ca.pem"]},
        "https only: PEM file of the CA that signed the registry's certificate (blank: system CAs).",
    ),
    "ssl_certificate_location": (
        "TLS client certificate file",
        {"type": ["string", "null"], "examples": ["/etc/registry/client.pem"]},
        "Mutual TLS only: PEM file of this client's certificate (with the key file below).",
    ),
    "ssl_key_location": (
        "TLS client key file",
        {"type": ["string", "null"], "examples": ["/etc/registry/client.key"]},
        "Mutual TLS only: PEM file of this client's private key.",
    ),
    TIMEOUT_KEY: (
        "Request timeout (s)",
        {"type": ["integer", "null"], "minimum": 1, "examples": [10]},
        "Bounds each registry request, so that an unreachable registry fails in seconds. Blank: 10.",
    ),
}

REGISTRY_UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden-fields": ["schema", "port", "host"],
    "relabeling": {"login": "Basic auth user", "password": "Basic auth password, or bearer token",
                   "extra": "Extra (JSON)"},
    "placeholders": {
        "login": "blank: no basic auth",
        "password": "with a user: its password; without: a bearer token",
        "extra": '{"url": "https://registry.example.com:8081"}',
    },
}
