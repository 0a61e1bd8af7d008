"""One Kafka client configuration, translated for each client library we use.

Users have one of two shapes already: the Airflow ``kafka`` connection extra (librdkafka
keys, JSON) or a Java ``client.properties`` file. We accept both, keep the librdkafka form
as the canonical one, and translate on demand: ``.confluent()`` for confluent-kafka (the
data path) and ``.kafka_python()`` for kafka-python (the transaction admin protocol).

A key we do not understand is an error, not a silent drop: a dropped ``security.protocol``
would send credentials in clear text or fail in confusing ways much later. Secrets never
appear in ``repr()`` or in ``.redacted()`` (the only form meant for logs).
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import ConfigError
from airflow_provider_kafka_eos.kafka.jaas import JaasSyntaxError, parse_jaas_config
from airflow_provider_kafka_eos.kafka.java_properties import read_properties_file
from airflow_provider_kafka_eos.kafka.oauth_token import ClientCredentialsTokenProvider

__all__ = [
    "SECRET_ENV_VARS",
    "KafkaClientConfig",
    "is_secret_key",
    "read_properties_file",
    "settings_from_env",
]

REDACTED = "***"
_SECRET_MARKERS = ("password", "secret", "token", "key", "jaas", "credential", "oauthbearer.config")


def is_secret_key(key: str) -> bool:
    """True for keys whose values must never be logged.

    Deliberately broad (any key mentioning password/secret/token/key/jaas/credential): redacting a
    harmless path such as ``ssl.key.location`` costs nothing, leaking a key costs a rotation.
    """
    k = key.lower()
    return any(m in k for m in _SECRET_MARKERS)


# Keys about *reaching and authenticating to* the cluster: translated for every client library.
_CONNECTION_KEYS = frozenset(
    {
        "bootstrap.servers",
        "client.id",
        "security.protocol",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "sasl.kerberos.service.name",
        "sasl.kerberos.principal",
        "sasl.kerberos.keytab",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.oauthbearer.method",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.scope",
        "sasl.oauthbearer.extensions",
        "sasl.oauthbearer.config",
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "ssl.crl.location",
        "ssl.endpoint.identification.algorithm",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.ca.pem",
        "ssl.certificate.pem",
        "ssl.key.pem",
        "ssl.cipher.suites",
        "enable.ssl.certificate.verification",
        "request.timeout.ms",
        "socket.timeout.ms",
        "socket.connection.setup.timeout.ms",
        "metadata.max.age.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "retry.backoff.ms",
        "connections.max.idle.ms",
        "client.dns.lookup",
        "broker.address.family",
        "debug",
        "log_level",
    }
)

# librdkafka producer/consumer tuning that may sit in a shared ``kafka`` connection extra: passed to
# confluent-kafka unchanged, irrelevant to the admin protocol (kafka-python ignores them).
_CLIENT_ROLE_KEYS = frozenset(
    {
        "group.id",
        "group.instance.id",
        "auto.offset.reset",
        "enable.auto.commit",
        "auto.commit.interval.ms",
        "enable.auto.offset.store",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "isolation.level",
        "fetch.min.bytes",
        "fetch.max.bytes",
        "fetch.wait.max.ms",
        "max.partition.fetch.bytes",
        "partition.assignment.strategy",
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "linger.ms",
        "queue.buffering.max.ms",
        "queue.buffering.max.messages",
        "queue.buffering.max.kbytes",
        "batch.num.messages",
        "batch.size",
        "compression.type",
        "compression.codec",
        "compression.level",
        "acks",
        "request.required.acks",
        "enable.idempotence",
        "message.timeout.ms",
        "delivery.timeout.ms",
        "message.max.bytes",
        "message.send.max.retries",
        "retries",
        "max.in.flight.requests.per.connection",
        "max.in.flight",
        "transaction.timeout.ms",
        "transactional.id",
        "statistics.interval.ms",
        "api.version.request",
        "topic.metadata.refresh.interval.ms",
        "socket.keepalive.enable",
        "socket.nagle.disable",
        "receive.message.max.bytes",
        "client.rack",
        "allow.auto.create.topics",
        "partitioner",
    }
)

# Java names with a librdkafka twin (client.properties); the value is copied unchanged.
_JAVA_TWINS = {
    "sasl.mechanism": "sasl.mechanisms",
    "sasl.kerberos.service.name": "sasl.kerberos.service.name",
    "ssl.key.password": "ssl.key.password",
    "ssl.keystore.password": "ssl.keystore.password",
    "ssl.cipher.suites": "ssl.cipher.suites",
    "sasl.oauthbearer.token.endpoint.url": "sasl.oauthbearer.token.endpoint.url",
    "max.request.size": "message.max.bytes",
    "max.block.ms": None,  # Java-producer only; nothing to translate, accepted and dropped
    "key.serializer": None,
    "value.serializer": None,
    "key.deserializer": None,
    "value.deserializer": None,
    "default.api.timeout.ms": None,
}

# Where each secret may come from instead of a file: KAFKA_EOS_ + the librdkafka key in upper case
# with dots as underscores (KAFKA_EOS_SASL_PASSWORD, KAFKA_EOS_SSL_KEY_PASSWORD, ...): every
# secret-bearing key, plus the SASL user name. docs/configuration/connection.md lists them.
SECRET_ENV_VARS: dict[str, str] = {
    f"KAFKA_EOS_{key.upper().replace('.', '_')}": key
    for key in (
        "sasl.username",
        "sasl.password",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.config",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.key.pem",
    )
}


def settings_from_env(env: Mapping[str, str]) -> dict[str, str]:
    """The librdkafka settings the environment supplies through :data:`SECRET_ENV_VARS`."""
    return {key: env[name] for name, key in SECRET_ENV_VARS.items() if env.get(name)}


_MECHANISMS = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER"}
_PROTOCOLS = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}


@dataclass(frozen=True)
class KafkaClientConfig:
    """A validated librdkafka-style client configuration.

    Build it with :meth:`from_mapping` or :meth:`from_properties_file`; read it translated with
    :meth:`confluent` / :meth:`kafka_python`; log only :meth:`redacted`.
    """

    _settings: Mapping[str, Any] = field(repr=False)
    source: str = "configuration"

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def from_mapping(
        cls, mapping: Mapping[str, Any], *, source: str = "connection extra"
    ) -> KafkaClientConfig:
        """librdkafka keys (the Airflow ``kafka`` connection extra); unknown keys raise ConfigError."""
        if not isinstance(mapping, Mapping):
            raise ConfigError(
                f"{source}: the client configuration must be a mapping of librdkafka keys, "
                f"got {type(mapping).__name__}"
            )
        settings: dict[str, Any] = {}
        for raw_key, value in mapping.items():
            if not isinstance(raw_key, str):
                raise ConfigError(f"{source}: configuration keys must be strings, got {raw_key!r}")
            key = raw_key.strip()
            if key == "sasl.mechanism":  # librdkafka accepts the Java spelling as an alias
                key = "sasl.mechanisms"
            if key == "max.request.size":  # Java's name of librdkafka's request size limit
                key = "message.max.bytes"
            if key not in _CONNECTION_KEYS and key not in _CLIENT_ROLE_KEYS:
                raise ConfigError(f"{source}: unknown or unsupported client configuration key {key!r}")
            if value is None:
                continue
            settings[key] = value
        return cls._validated(settings, source)

    @classmethod
    def from_properties_file(
        cls,
        path: str | Path,
        *,
        overrides: Mapping[str, Any] | None = None,
        defaults: Mapping[str, Any] | None = None,
    ) -> KafkaClientConfig:
        """A Java ``client.properties``: Java keys with a librdkafka twin, or librdkafka keys.

        ``overrides`` (librdkafka keys: ``--bootstrap-servers``, secrets from the environment)
        win over the file and ``defaults`` fill what neither gives; validation runs once on the
        combined settings, so a file without ``bootstrap.servers`` or without a password is fine
        when the command line or the environment supplies it.
        """
        return cls.from_properties(
            read_properties_file(path), source=str(path), overrides=overrides, defaults=defaults
        )

    @classmethod
    def from_properties(
        cls,
        props: Mapping[str, str],
        *,
        source: str = "client.properties",
        overrides: Mapping[str, Any] | None = None,
        defaults: Mapping[str, Any] | None = None,
    ) -> KafkaClientConfig:
        """Translate Java client properties (already parsed) to the librdkafka form."""
        settings: dict[str, Any] = {}
        truststore_type = props.get("ssl.truststore.type", "JKS").upper()
        keystore_type = props.get("ssl.keystore.type", "JKS").upper()
        for key, value in props.items():
            if key in ("ssl.truststore.type", "ssl.keystore.type"):
                continue
            if key == "sasl.jaas.config":
                settings.update(_translate_jaas(value, props.get("sasl.mechanism", "GSSAPI"), source))
            elif key == "ssl.truststore.location":
                if truststore_type != "PEM":
                    raise ConfigError(
                        f"{source}: key 'ssl.truststore.location' is a {truststore_type} truststore, which "
                        "librdkafka and kafka-python cannot read; convert it to PEM and set "
                        "'ssl.truststore.type=PEM' (or use 'ssl.ca.location')"
                    )
                settings["ssl.ca.location"] = value
            elif key == "ssl.truststore.certificates":
                settings["ssl.ca.pem"] = value
            elif key == "ssl.keystore.location":
                if keystore_type == "PKCS12":
                    settings["ssl.keystore.location"] = value
                else:
                    raise ConfigError(
                        f"{source}: key 'ssl.keystore.location' is a {keystore_type} keystore; use a PKCS12 "
                        "keystore, or PEM files via 'ssl.certificate.location' and 'ssl.key.location'"
                    )
            elif key == "ssl.keystore.certificate.chain":
                settings["ssl.certificate.pem"] = value
            elif key == "ssl.keystore.key":
                settings["ssl.key.pem"] = value
            elif key == "ssl.truststore.password":
                continue  # only guards JKS integrity; PEM truststores have none
            elif key in _JAVA_TWINS:
                twin = _JAVA_TWINS[key]
                if twin is not None:
                    settings[twin] = value
            elif key in _CONNECTION_KEYS or key in _CLIENT_ROLE_KEYS:
                settings[key] = value
            else:
                raise ConfigError(f"{source}: unknown or untranslatable client property {key!r}")
        extra = {**(defaults or {}), **(overrides or {})}
        if extra:
            # The same key check as a connection extra, then one validation of the whole.
            for raw_key in extra:
                key = {"sasl.mechanism": "sasl.mechanisms", "max.request.size": "message.max.bytes"}.get(
                    raw_key, raw_key)
                if key not in _CONNECTION_KEYS and key not in _CLIENT_ROLE_KEYS:
                    raise ConfigError(f"{source}: unknown or unsupported client configuration key {key!r}")
            for key, value in (defaults or {}).items():
                if value is not None:
                    settings.setdefault(key, value)
            for key, value in (overrides or {}).items():
                if value is not None:
                    settings[key] = value
        return cls._validated(settings, source)

    @classmethod
    def _validated(cls, settings: dict[str, Any], source: str) -> KafkaClientConfig:
        servers = settings.get("bootstrap.servers")
        if isinstance(servers, (list, tuple)):
            servers = ",".join(str(s) for s in servers)
            settings["bootstrap.servers"] = servers
        if not servers or not str(servers).strip():
            raise ConfigError(f"{source}: required key 'bootstrap.servers' is missing")
        for server in str(servers).split(","):
            if not re.fullmatch(r"\s*[\w.\-\[\]:]+:\d+\s*", server):
                raise ConfigError(
                    f"{source}: key 'bootstrap.servers' entry {server.strip()!r} is not host:port"
                )
        protocol = str(settings.get("security.protocol", "PLAINTEXT")).upper()
        if protocol not in _PROTOCOLS:
            raise ConfigError(
                f"{source}: key 'security.protocol' must be one of {', '.join(sorted(_PROTOCOLS))}, "
                f"got {settings['security.protocol']!r}"
            )
        if "security.protocol" in settings:
            settings["security.protocol"] = protocol
        mechanism = settings.get("sasl.mechanisms")
        if mechanism is not None:
            mechanism = str(mechanism).upper()
            if mechanism not in _MECHANISMS:
                raise ConfigError(
                    f"{source}: key 'sasl.mechanisms' must be one of {', '.join(sorted(_MECHANISMS))}, "
                    f"got {settings['sasl.mechanisms']!r}"
                )
            settings["sasl.mechanisms"] = mechanism
        if (
            protocol.startswith("SASL")
            and mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
            and not (settings.get("sasl.username") and settings.get("sasl.password"))
        ):
            raise ConfigError(
                f"{source}: SASL mechanism {mechanism} needs 'sasl.username' and 'sasl.password'"
            )
        return cls(dict(settings), source)

    # -- views -------------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return str(self._settings["bootstrap.servers"])

    @property
    def security_protocol(self) -> str:
        return str(self._settings.get("security.protocol", "PLAINTEXT"))

    def get(self, key: str, default: Any = None) -> Any:
        return self._settings.get(key, default)

    def with_overrides(self, overrides: Mapping[str, Any]) -> KafkaClientConfig:
        """A copy with more librdkafka keys (same validation), e.g. ``{"client.id": ...}``."""
        return KafkaClientConfig.from_mapping({**self._settings, **overrides}, source=self.source)

    def confluent(self) -> dict[str, Any]:
        """The dict to pass to confluent-kafka's Producer / Consumer / AdminClient (a fresh copy)."""
        return dict(self._settings)

    def kafka_python(self) -> dict[str, Any]:
        """Keyword arguments for kafka-python clients (KafkaAdminClient and friends).

        Raises ConfigError for settings kafka-python cannot honour (PKCS12 keystores, inline PEM,
        unsecured OAUTHBEARER JWTs), rather than connecting with weaker settings than configured.
        """
        s = self._settings
        out: dict[str, Any] = {
            "bootstrap_servers": [h.strip() for h in self.bootstrap_servers.split(",")],
            "security_protocol": self.security_protocol,
        }
        simple = {
            "client.id": ("client_id", str),
            "request.timeout.ms": ("request_timeout_ms", int),
            "metadata.max.age.ms": ("metadata_max_age_ms", int),
            "reconnect.backoff.ms": ("reconnect_backoff_ms", int),
            "reconnect.backoff.max.ms": ("reconnect_backoff_max_ms", int),
            "retry.backoff.ms": ("retry_backoff_ms", int),
            "connections.max.idle.ms": ("connections_max_idle_ms", int),
            "sasl.mechanisms": ("sasl_mechanism", str),
            "sasl.username": ("sasl_plain_username", str),
            "sasl.password": ("sasl_plain_password", str),
            "sasl.kerberos.service.name": ("sasl_kerberos_service_name", str),
            "ssl.ca.location": ("ssl_cafile", str),
            "ssl.certificate.location": ("ssl_certfile", str),
            "ssl.key.location": ("ssl_keyfile", str),
            "ssl.key.password": ("ssl_password", str),
            "ssl.crl.location": ("ssl_crlfile", str),
        }
        for key, (name, conv) in simple.items():
            if key in s:
                try:
                    out[name] = conv(s[key])
                except (TypeError, ValueError):
                    raise ConfigError(f"{self.source}: key {key!r} must be {conv.__name__}") from None
        for key in (
            "ssl.keystore.location",
            "ssl.ca.pem",
            "ssl.certificate.pem",
            "ssl.key.pem",
            "sasl.kerberos.keytab",
            "sasl.kerberos.principal",
        ):
            if key in s:
                raise ConfigError(
                    f"{self.source}: key {key!r} cannot be translated for kafka-python (the "
                    "transaction admin client); use PEM files via 'ssl.ca.location', "
                    "'ssl.certificate.location', "
                    "'ssl.key.location'"
                    if key.startswith("ssl.")
                    else f"{self.source}: key {key!r} cannot be translated for kafka-python; "
                    "use a kinit-managed "
                    "ticket cache for GSSAPI"
                )
        if str(s.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
            out["ssl_check_hostname"] = False
        if str(s.get("enable.ssl.certificate.verification", "true")).lower() == "false":
            # kafka-python ignores every other ssl_* setting when given a context: carry the client
            # certificate over, or mTLS would silently stop presenting it.
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            if "ssl_certfile" in out:
                try:
                    ctx.load_cert_chain(out["ssl_certfile"], out.get("ssl_keyfile"), out.get("ssl_password"))
                except (OSError, ssl.SSLError) as exc:
                    raise ConfigError(
                        f"{self.source}: key 'ssl.certificate.location' could not be loaded "
                        f"({exc.__class__.__name__})"
                    ) from None
            out["ssl_context"] = ctx
        if s.get("sasl.mechanisms") == "OAUTHBEARER":
            out["sasl_oauth_token_provider"] = self._oauth_provider()
        return out

    def redacted(self) -> dict[str, Any]:
        """The librdkafka settings with every secret value replaced by ``***`` (safe to log)."""
        return {k: (REDACTED if is_secret_key(k) else v) for k, v in sorted(self._settings.items())}

    def __repr__(self) -> str:
        return f"KafkaClientConfig({self.redacted()!r})"

    __str__ = __repr__

    def _oauth_provider(self):
        s = self._settings
        if str(s.get("sasl.oauthbearer.method", "default")).lower() != "oidc":
            raise ConfigError(
                f"{self.source}: key 'sasl.oauthbearer.method' must be 'oidc' for the transaction "
                "admin client "
                "(kafka-python cannot use librdkafka's unsecured JWT 'sasl.oauthbearer.config')"
            )
        for key in (
            "sasl.oauthbearer.client.id",
            "sasl.oauthbearer.client.secret",
            "sasl.oauthbearer.token.endpoint.url",
        ):
            if not s.get(key):
                raise ConfigError(f"{self.source}: OAUTHBEARER with method oidc needs key {key!r}")
        # kafka-python checks isinstance(provider, AbstractTokenProvider) (an ABC): register our class
        # as one here, where kafka-python is in use, rather than importing it at module level, which
        # made every Spark task on an executor without kafka-python fail before the job's one-line
        # "lacks kafka-python" check could run (this module travels to every executor).
        from kafka.net.sasl.oauth import AbstractTokenProvider

        AbstractTokenProvider.register(ClientCredentialsTokenProvider)
        return ClientCredentialsTokenProvider(
            token_endpoint_url=str(s["sasl.oauthbearer.token.endpoint.url"]),
            client_id=str(s["sasl.oauthbearer.client.id"]),
            client_secret=str(s["sasl.oauthbearer.client.secret"]),
            scope=s.get("sasl.oauthbearer.scope"),
        )








def _translate_jaas(value: str, mechanism: str, source: str) -> dict[str, str]:
    """``sasl.jaas.config`` for PLAIN / SCRAM -> librdkafka's sasl.username / sasl.password."""
    try:
        entries = parse_jaas_config(value or "")
    except JaasSyntaxError as exc:
        raise ConfigError(
            f"{source}: key 'sasl.jaas.config' is not a JAAS entry Kafka accepts ({exc}); write "
            'LoginModule required key="value" ...; with values in double quotes'
        ) from None
    if len(entries) != 1:
        raise ConfigError(
            f"{source}: key 'sasl.jaas.config' holds {len(entries)} login module entries; "
            "Kafka's clients take exactly one"
        )
    module = entries[0].login_module.rsplit(".", 1)[-1]
    options = entries[0].options
    if module in ("PlainLoginModule", "ScramLoginModule"):
        if "username" not in options or "password" not in options:
            raise ConfigError(f"{source}: key 'sasl.jaas.config' ({module}) needs username and password")
        return {"sasl.username": options["username"], "sasl.password": options["password"]}
    if module == "Krb5LoginModule":
        translated = {}
        if "principal" in options:
            translated["sasl.kerberos.principal"] = options["principal"]
        if "keyTab" in options:
            translated["sasl.kerberos.keytab"] = options["keyTab"]
        return translated
    raise ConfigError(
        f"{source}: key 'sasl.jaas.config' uses {module}, which cannot be translated "
        f"(mechanism {mechanism}); use librdkafka 'sasl.*' keys instead"
    )

