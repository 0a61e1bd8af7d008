"""The ``kafka_eos`` connection form: one definition for every Airflow version's connection UI.

Airflow 3.2+ renders provider info's ``conn-fields`` (JSON-schema fields, read without importing
the hook); Airflow 3.1 renders the hook's ``get_connection_form_widgets`` (WTForms fields, which
its API server mocks). Both are built from :data:`FIELDS` here, so the two cannot drift.

Each field's name *is* its key in the connection's ``extra``: the librdkafka key for the client
settings (``bootstrap.servers``, ``security.protocol``, ...) and our own key for the rest
(``manifest_base_uri``, ``two_phase_commit``, ``transaction_timeout_ms``). So an extra pasted as
JSON (the shape of Airflow's ``kafka`` connection) shows up in the fields, and a form-made
connection is plain JSON the CLI and other tools can read. The form stores ``null`` for a field
left blank; the hook treats ``null`` and ``""`` as "not set".

No Airflow import here: ``get_provider_info`` (``get_provider_info.py``) reads this module while
Airflow discovers providers.
"""

from __future__ import annotations

from typing import Any

SECURITY_PROTOCOLS = ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SASL_MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"]

# Our keys in the extra (never passed to a Kafka client); the hook reads and validates them.
MANIFEST_BASE_URI_KEY = "manifest_base_uri"
TWO_PHASE_COMMIT_KEY = "two_phase_commit"
TRANSACTION_TIMEOUT_MS_KEY = "transaction_timeout_ms"
MANIFEST_STORE_CONN_ID_KEY = "manifest_store_conn_id"
PROVIDER_KEYS = (MANIFEST_BASE_URI_KEY, TWO_PHASE_COMMIT_KEY, TRANSACTION_TIMEOUT_MS_KEY,
                 MANIFEST_STORE_CONN_ID_KEY)

# name -> (label, JSON schema, description). Order is the form's order.
FIELDS: dict[str, tuple[str, dict[str, Any], str]] = {
    "bootstrap.servers": (
        "Bootstrap servers",
        {"type": ["string", "null"], "examples": ["broker1:9092,broker2:9092"]},
        "Required. Comma-separated host:port list of the Kafka cluster (librdkafka bootstrap.servers).",
    ),
    MANIFEST_BASE_URI_KEY: (
        "Manifest store URI",
        {
            "type": ["string", "null"],
            "examples": ["s3://bucket/kafka-eos/manifests", "file:///var/lib/kafka-eos/manifests"],
        },
        "Required by pipelines and cleanup: where checkpoint manifests live (a local path, file://, or an "
        "fsspec URL such as s3://bucket/prefix). The Test button checks it can be listed.",
    ),
    "security.protocol": (
        "Security protocol",
        # values_display: Airflow's form labels a None option "null" otherwise (seen in the browser pass).
        {
            "type": ["string", "null"],
            "enum": [None, *SECURITY_PROTOCOLS],
            "values_display": {"null": "PLAINTEXT (default)"},
        },
        "How clients talk to the brokers. Blank: PLAINTEXT.",
    ),
    "sasl.mechanisms": (
        "SASL mechanism",
        {"type": ["string", "null"], "enum": [None, *SASL_MECHANISMS], "values_display": {"null": "none"}},
        "SASL_PLAINTEXT / SASL_SSL only. The credentials go in the SASL username and SASL password "
        "fields above.",
    ),
    "ssl.ca.location": (
        "TLS CA file",
        {"type": ["string", "null"], "examples": ["/etc/kafka/ca.pem"]},
        "SSL / SASL_SSL: PEM file of the CA that signed the brokers' certificates (blank: system CAs).",
    ),
    "ssl.certificate.location": (
        "TLS client certificate file",
        {"type": ["string", "null"], "examples": ["/etc/kafka/client.pem"]},
        "Mutual TLS only: PEM file of this client's certificate.",
    ),
    "ssl.key.location": (
        "TLS client key file",
        {"type": ["string", "null"], "examples": ["/etc/kafka/client.key"]},
        "Mutual TLS only: PEM file of this client's private key.",
    ),
    TWO_PHASE_COMMIT_KEY: (
        "Two-phase commit (KIP-939)",
        {"type": ["boolean", "null"], "default": False},
        "On: the pipelines on this connection use KIP-939 2PC. The Test button fails unless the cluster "
        "advertises and enables it; preflight refuses a pipeline without two_phase_commit=True.",
    ),
    TRANSACTION_TIMEOUT_MS_KEY: (
        "Transaction timeout (ms)",
        {"type": ["integer", "null"], "minimum": 1, "examples": [900000]},
        "The transaction.timeout.ms your pipelines use. The Test button fails if it exceeds the "
        "brokers' transaction.max.timeout.ms; preflight refuses a pipeline using another value. Blank: "
        "not checked.",
    ),
}

# Standard fields: host/port/schema hidden (bootstrap.servers is the field); login and password
# are the SASL credentials (the password column is encrypted and masked, unlike extra).
UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden-fields": ["schema", "port", "host"],
    "relabeling": {"login": "SASL username", "password": "SASL password", "extra": "Extra (librdkafka JSON)"},
    "placeholders": {
        "login": "etl (SASL only)",
        "password": "SASL password (SASL only)",
        "extra": '{"bootstrap.servers": "broker1:9092", "client.id": "etl"}',
    },
}


Fields = dict[str, tuple[str, dict[str, Any], str]]  # name -> (label, JSON schema, description)


def conn_fields(fields: Fields | None = None) -> dict[str, dict[str, Any]]:
    """Provider info's ``conn-fields`` (Airflow 3.2+); ``fields``: another connection type's (default
    ``kafka_eos``'s :data:`FIELDS`)."""
    return {
        name: {"label": label, "description": description, "schema": dict(schema)}
        for name, (label, schema, description) in (FIELDS if fields is None else fields).items()
    }


def form_widgets(fields: Fields | None = None) -> dict[str, Any]:
    """``get_connection_form_widgets`` for Airflow 3.1 (WTForms, mocked by its API server)."""
    from flask_appbuilder.fieldwidgets import BS3TextFieldWidget
    from flask_babel import lazy_gettext
    from wtforms import BooleanField, IntegerField, StringField
    from wtforms.validators import Optional, any_of

    widgets: dict[str, Any] = {}
    for name, (label, schema, description) in (FIELDS if fields is None else fields).items():
        types = schema["type"]
        if "boolean" in types:
            widgets[name] = BooleanField(lazy_gettext(label), description=description, default=False)
            continue
        validators: list[Any] = [Optional()]
        if "enum" in schema:
            validators.append(any_of([v for v in schema["enum"] if v is not None]))
        field_class = IntegerField if "integer" in types else StringField
        widgets[name] = field_class(
            lazy_gettext(label), widget=BS3TextFieldWidget(), validators=validators, description=description
        )
    return widgets


def ui_field_behaviour_info(behaviour: dict[str, Any] | None = None) -> dict[str, Any]:
    """Provider info's ``ui-field-behaviour`` (a fresh copy: Airflow edits what it is given)."""
    behaviour = UI_FIELD_BEHAVIOUR if behaviour is None else behaviour
    return {key: (list(v) if isinstance(v, list) else dict(v)) for key, v in behaviour.items()}


def ui_field_behaviour(behaviour: dict[str, Any] | None = None) -> dict[str, Any]:
    """``get_ui_field_behaviour`` for Airflow 3.1 (snake_case keys)."""
    behaviour = UI_FIELD_BEHAVIOUR if behaviour is None else behaviour
    return {
        "hidden_fields": list(behaviour["hidden-fields"]),
        "relabeling": dict(behaviour["relabeling"]),
        "placeholders": dict(behaviour["placeholders"]),
    }


# -- reading the provider keys back (the hook calls these; each error names key and connection) ---


def blank(value: Any) -> bool:
    """A field the form left empty: ``null`` or only whitespace."""
    return value is None or (isinstance(value, str) and not value.strip())


def validate_manifest_base_uri(value: Any, *, source: str) -> str | None:
    """The store URI, or None when blank; ConfigError for a URI no manifest store can use.

    Accepted: an absolute local path, ``file://``, or a scheme fsspec knows (``s3://``, ``gs://``,
    ``abfs://``, ...). Caught here rather than at the first write: a typo such as ``s3:/bucket``
    or a relative path would otherwise put manifests somewhere nobody looks.
    """
    from airflow_provider_kafka_eos.kafka.errors import ConfigError

    if blank(value):
        return None
    if not isinstance(value, str):
        raise ConfigError(
            f"{source}: {MANIFEST_BASE_URI_KEY} must be a string URI, got {type(value).__name__}"
        )
    uri = value.strip()
    if any(ch.isspace() for ch in uri):
        raise ConfigError(f"{source}: {MANIFEST_BASE_URI_KEY} {uri!r} contains whitespace")
    if "://" not in uri:
        if ":" in uri.split("/", 1)[0] or not uri.startswith("/"):
            raise ConfigError(
                f"{source}: {MANIFEST_BASE_URI_KEY} {uri!r} is neither an absolute path nor a URL "
                "(e.g. /var/lib/kafka-eos/manifests, file:///..., s3://bucket/prefix)"
            )
        return uri
    scheme, rest = uri.split("://", 1)
    if scheme != "file":
        from fsspec.registry import known_implementations

        if scheme not in known_implementations:
            raise ConfigError(
                f"{source}: {MANIFEST_BASE_URI_KEY} {uri!r} has an unknown scheme {scheme!r} "
                "(use file://, an absolute path, or an fsspec scheme such as s3://, gs://, abfs://)"
            )
    if not rest.strip("/"):
        raise ConfigError(f"{source}: {MANIFEST_BASE_URI_KEY} {uri!r} names no location after {scheme}://")
    return uri


def read_two_phase_commit(value: Any, *, source: str) -> bool:
    """``two_phase_commit``: a JSON boolean (or "true"/"false" from a connection URI); blank: False."""
    from airflow_provider_kafka_eos.kafka.errors import ConfigError

    if blank(value):
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{source}: {TWO_PHASE_COMMIT_KEY} must be true or false, got {value!r}")


def read_transaction_timeout_ms(value: Any, *, source: str) -> int | None:
    """``transaction_timeout_ms``: a positive integer (a string of digits from a URI); blank: None."""
    from airflow_provider_kafka_eos.kafka.errors import ConfigError

    if blank(value):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(
            f"{source}: {TRANSACTION_TIMEOUT_MS_KEY} must be a positive integer number of milliseconds, "
            f"got {value!r}"
        )
    return value
