"""What a test or ``./run kafka`` may ask of an Apache Kafka cluster, and the broker configs it means.

The option names are the embedded broker's (``kafka_eos_testing/embedded.py``), so the pytest factory can
hand the same ``kafka_broker_factory(**options)`` to either broker. ``node_properties`` is the
one place that turns options into Kafka configs.
"""

from __future__ import annotations

import json
import pathlib
import urllib.parse
from dataclasses import dataclass, field, fields
from typing import Any

# A SASL cluster started without an ACL file gets this development super user (as `./run kafka --sasl`).
DEFAULT_SASL_USERS = {"admin": "admin-secret"}
DEFAULT_SUPER_USER = "User:admin"
CONTROLLER_LISTENER = "CONTROLLER"
CLIENT_LISTENER = "CLIENT"
# Loopback SASL_PLAINTEXT (PLAIN, the nodes' own user) listener of the TLS / SCRAM modes: the
# nodes replicate over it and the launcher probes readiness and creates ACLs through it, so the
# client listener carries exactly the mode under test and nothing of the launcher's own.
INTERNAL_LISTENER = "INTERNAL"
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# The mTLS mode's super user: the launcher issues a client certificate with this subject.
MTLS_ADMIN_DN = "CN=admin,O=kafka-eos"


class UnsupportedOption(ValueError):
    """An embedded-broker option real Kafka cannot have; the message names the capability."""


@dataclass
class KafkaOptions:
    """A cluster's settings. Defaults match the embedded broker's (and mostly Kafka's own)."""

    nodes: int = 1
    data_dir: str | None = None
    listen: list[tuple[str, int]] = field(default_factory=list)  # one HOST:PORT per node; port 0 = free
    two_phase_commit: bool = False
    sasl: bool = False
    acl_file: str | None = None  # the embedded broker's JSON users/super_users/acls; implies sasl
    # Secured modes (certificates made per run in <data_dir>/tls, see certs.py):
    tls: bool = False  # the client listener speaks TLS: SSL, or SASL_SSL with sasl
    mtls: bool = False  # SSL with required client certificates; principal = certificate DN (no SASL)
    sasl_mechanism: str = "PLAIN"  # of the client listener; SCRAM users are added at format time
    oidc_jwks_url: str | None = None  # OAUTHBEARER: the JWKS the broker validates tokens against
    transaction_max_timeout_ms: int = 900_000
    abort_check_interval_ms: int = 10_000
    transaction_version: int = 2
    default_partitions: int = 1
    auto_create_topics: bool = True
    transactional_id_expiration_ms: int = 604_800_000
    # transaction.partition.verification.enable: False lets a Produce below v12 append a
    # transactional batch its coordinator never added (how a test makes a KIP-664 hanging transaction)
    transaction_partition_verification: bool = True
    # The embedded broker's injected marker delay; real Kafka writes markers asynchronously on
    # its own, so the option is accepted (tests that ask for the window get it) and ignored.
    marker_delay_ms: int = 0
    socket_request_max_bytes: int = 100 * 1024 * 1024
    max_connections: int | None = None  # Kafka's default: unlimited
    # connections.max.reauth.ms: a SASL session ends with its credential (an OAUTHBEARER token's
    # exp) and the client must re-authenticate (KIP-368); Kafka's default 0 keeps sessions forever.
    max_reauth_ms: int | None = None
    heap: str = "384m"
    log_level: str = "INFO"

    @classmethod
    def from_mapping(cls, options: dict[str, Any]) -> KafkaOptions:
        """Options as the embedded broker's fixture takes them; unknown ones raise ``TypeError``."""
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in options.items():
            if key == "partitions":
                key = "default_partitions"
            if key == "node_id":
                raise UnsupportedOption(
                    "needs a chosen node id: the Apache Kafka launcher numbers nodes 1..N"
                )
            if key not in known:
                raise TypeError(f"unknown broker option {key!r}; known: {', '.join(sorted(known))}")
            if value is not None:
                values[key] = value
        opts = cls(**values)
        opts.validate()
        return opts

    def validate(self) -> None:
        if self.nodes not in (1, 3):
            raise ValueError(f"nodes must be 1 or 3, got {self.nodes}")
        if self.listen and len(self.listen) != self.nodes:
            raise ValueError(f"--listen names {len(self.listen)} addresses for {self.nodes} node(s)")
        if self.transaction_version not in (1, 2):
            raise ValueError(f"transaction_version must be 1 or 2, got {self.transaction_version}")
        if self.sasl_mechanism not in SASL_MECHANISMS:
            raise ValueError(f"sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)}")
        if self.mtls and self.sasl:
            raise ValueError("mtls authenticates by client certificate: it cannot be combined with sasl")
        if self.sasl_mechanism != "PLAIN" and not self.sasl:
            raise ValueError(f"sasl_mechanism {self.sasl_mechanism} needs sasl")
        if (self.sasl_mechanism == "OAUTHBEARER") != bool(self.oidc_jwks_url):
            raise ValueError("sasl_mechanism OAUTHBEARER and oidc_jwks_url go together (see oidc.py)")

    @property
    def secured(self) -> bool:
        """Authenticated clients and ACLs (StandardAuthorizer)."""
        return self.sasl or self.acl_file is not None or self.mtls

    @property
    def uses_sasl(self) -> bool:
        return (self.sasl or self.acl_file is not None) and not self.mtls

    @property
    def uses_tls(self) -> bool:
        return self.tls or self.mtls

    @property
    def internal_listener(self) -> bool:
        """Whether the nodes replicate over :data:`INTERNAL_LISTENER` (every mode but the old two)."""
        return self.uses_tls or self.sasl_mechanism != "PLAIN"

    @property
    def client_protocol(self) -> str:
        if self.uses_tls:
            return "SASL_SSL" if self.uses_sasl else "SSL"
        return "SASL_PLAINTEXT" if self.uses_sasl else "PLAINTEXT"

    def security_doc(self) -> dict[str, Any]:
        """``{"users", "super_users", "acls"}`` of a SASL cluster (the embedded broker's ACL file format)."""
        if self.acl_file:
            doc = json.loads(pathlib.Path(self.acl_file).read_text())
        elif self.mtls:
            doc = {"users": {}, "super_users": [f"User:{MTLS_ADMIN_DN}"], "acls": []}
        else:
            doc = {"users": dict(DEFAULT_SASL_USERS), "super_users": [DEFAULT_SUPER_USER], "acls": []}
        return {
            "users": doc.get("users", {}),
            "super_users": doc.get("super_users", []),
            "acls": doc.get("acls", []),
        }


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def node_properties(
    opts: KafkaOptions,
    *,
    node_id: int,
    host: str,
    port: int,
    controller_port: int,
    voters: str,
    log_dir: str,
    internal_user: tuple[str, str] | None,
    internal_port: int = 0,
    tls_files: dict[str, str] | None = None,
) -> dict[str, str]:
    """server.properties of one combined broker+controller node.

    ``tls_files`` (``ca``, ``keystore``: PEM paths) when the client listener speaks TLS;
    ``internal_port`` for :data:`INTERNAL_LISTENER` when ``opts.internal_listener``.
    """
    replication = "3" if opts.nodes == 3 else "1"
    min_isr = "2" if opts.nodes == 3 else "1"
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "controller.listener.names": CONTROLLER_LISTENER,
        "log.dirs": log_dir,
        "num.partitions": str(opts.default_partitions),
        "auto.create.topics.enable": str(opts.auto_create_topics).lower(),
        "default.replication.factor": replication,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": replication,
        "offsets.topic.num.partitions": "6",
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": "6",
        "share.coordinator.state.topic.replication.factor": replication,
        "share.coordinator.state.topic.min.isr": min_isr,
        "transaction.max.timeout.ms": str(opts.transaction_max_timeout_ms),
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": str(opts.abort_check_interval_ms),
        "transactional.id.expiration.ms": str(opts.transactional_id_expiration_ms),
        "transaction.two.phase.commit.enable": str(opts.two_phase_commit).lower(),
        "transaction.partition.verification.enable": str(opts.transaction_partition_verification).lower(),
        "group.initial.rebalance.delay.ms": "0",
        # Kafka's floor is 6 s; tests of session expiry use 1 s sessions (the embedded broker's floor).
        "group.min.session.timeout.ms": "500",
        "num.network.threads": "2",
        "num.io.threads": "4",
        "background.threads": "4",
        "log.cleaner.threads": "1",
        "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
        "num.recovery.threads.per.data.dir": "1",
        "log.segment.bytes": str(64 * 1024 * 1024),
        "controlled.shutdown.enable": "true",
        # A node restarted after kill -9 waits until the controller drops its old registration:
        # the broker session (default 9 s) is most of a crash-restart's time in the tests.
        "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500",
        "socket.request.max.bytes": str(opts.socket_request_max_bytes),
    }
    if opts.max_connections is not None:
        props["max.connections"] = str(opts.max_connections)
    if opts.max_reauth_ms is not None:
        props["connections.max.reauth.ms"] = str(opts.max_reauth_ms)
    if opts.two_phase_commit:
        # KIP-939's InitProducerId v6 (Enable2Pc) is still "latestVersionUnstable" in Kafka 4.4:
        # without this the broker advertises v5 and closes a connection that sends v6.
        props["unstable.api.versions.enable"] = "true"
    if opts.internal_listener:
        _secured_listeners(opts, props, host, port, controller_port, internal_port, internal_user, tls_files)
        return props
    client, controller = CLIENT_LISTENER, CONTROLLER_LISTENER
    client_protocol = "SASL_PLAINTEXT" if opts.secured else "PLAINTEXT"
    props.update(
        {
            "listeners": f"{client}://{host}:{port},{controller}://127.0.0.1:{controller_port}",
            "advertised.listeners": f"{client}://{host}:{port}",
            "listener.security.protocol.map": f"{client}:{client_protocol},{controller}:PLAINTEXT",
            "inter.broker.listener.name": CLIENT_LISTENER,
        }
    )
    if opts.secured:
        assert internal_user is not None
        doc = opts.security_doc()
        users = {**doc["users"], internal_user[0]: internal_user[1]}
        entries = " ".join(f"user_{name}={_jaas_quote(pw)}" for name, pw in sorted(users.items()))
        jaas = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f"username={_jaas_quote(internal_user[0])} password={_jaas_quote(internal_user[1])} {entries};"
        )
        # The controller listener is PLAINTEXT on loopback: its peers are the nodes (User:ANONYMOUS).
        supers = [*doc["super_users"], f"User:{internal_user[0]}", "User:ANONYMOUS"]
        props.update(
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                f"listener.name.{CLIENT_LISTENER.lower()}.plain.sasl.jaas.config": jaas,
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": ";".join(dict.fromkeys(supers)),
                "allow.everyone.if.no.acl.found": "false",
            }
        )
    return props


def _secured_listeners(
    opts: KafkaOptions,
    props: dict[str, str],
    host: str,
    port: int,
    controller_port: int,
    internal_port: int,
    internal_user: tuple[str, str] | None,
    tls_files: dict[str, str] | None,
) -> None:
    """Listeners of the TLS / mTLS / SCRAM modes: the mode on CLIENT, the nodes' own on INTERNAL."""
    client, internal = CLIENT_LISTENER.lower(), INTERNAL_LISTENER.lower()
    internal_protocol = "SASL_PLAINTEXT" if opts.secured else "PLAINTEXT"
    props.update(
        {
            "listeners": f"{CLIENT_LISTENER}://{host}:{port},{INTERNAL_LISTENER}://127.0.0.1:{internal_port},"
            f"{CONTROLLER_LISTENER}://127.0.0.1:{controller_port}",
            "advertised.listeners": f"{CLIENT_LISTENER}://{host}:{port},"
            f"{INTERNAL_LISTENER}://127.0.0.1:{internal_port}",
            "listener.security.protocol.map": f"{CLIENT_LISTENER}:{opts.client_protocol},"
            f"{INTERNAL_LISTENER}:{internal_protocol},{CONTROLLER_LISTENER}:PLAINTEXT",
            "inter.broker.listener.name": INTERNAL_LISTENER,
        }
    )
    if opts.uses_tls:
        assert tls_files is not None
        props.update(
            {
                f"listener.name.{client}.ssl.keystore.type": "PEM",
                f"listener.name.{client}.ssl.keystore.location": tls_files["keystore"],
                f"listener.name.{client}.ssl.truststore.type": "PEM",
                f"listener.name.{client}.ssl.truststore.location": tls_files["ca"],
            }
        )
        if opts.mtls:
            props[f"listener.name.{client}.ssl.client.auth"] = "required"
    if not opts.secured:
        return
    assert internal_user is not None
    doc = opts.security_doc()
    props.update(
        {
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            f"listener.name.{internal}.sasl.enabled.mechanisms": "PLAIN",
            f"listener.name.{internal}.plain.sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f"username={_jaas_quote(internal_user[0])} password={_jaas_quote(internal_user[1])} "
                f"user_{internal_user[0]}={_jaas_quote(internal_user[1])};"
            ),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": ";".join(
                dict.fromkeys([*doc["super_users"], f"User:{internal_user[0]}", "User:ANONYMOUS"])
            ),
            "allow.everyone.if.no.acl.found": "false",
        }
    )
    if opts.uses_sasl:
        mechanism = opts.sasl_mechanism
        props[f"listener.name.{client}.sasl.enabled.mechanisms"] = mechanism
        if mechanism == "PLAIN":
            entries = " ".join(f"user_{name}={_jaas_quote(pw)}" for name, pw in sorted(doc["users"].items()))
            jaas = f"org.apache.kafka.common.security.plain.PlainLoginModule required {entries};"
        elif mechanism == "OAUTHBEARER":  # Kafka 4.4's OIDC validation: JWT signature, exp, aud
            jaas = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
            props[f"listener.name.{client}.oauthbearer.sasl.server.callback.handler.class"] = (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
            )
            props["sasl.oauthbearer.jwks.endpoint.url"] = str(opts.oidc_jwks_url)
            props["sasl.oauthbearer.expected.audience"] = "kafka"
            # The issuer of oidc.OidcServer's tokens: its own origin.
            origin = urllib.parse.urlsplit(str(opts.oidc_jwks_url))
            props["sasl.oauthbearer.expected.issuer"] = f"{origin.scheme}://{origin.netloc}"
        else:  # SCRAM: the credentials live in the metadata log (added at format time)
            jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        props[f"listener.name.{client}.{mechanism.lower()}.sasl.jaas.config"] = jaas


def scram_format_arguments(opts: KafkaOptions) -> list[str]:
    """``--add-scram`` arguments of StorageTool format (they hold passwords: pass them in an @argfile)."""
    if not (opts.uses_sasl and opts.sasl_mechanism.startswith("SCRAM")):
        return []
    args = []
    for name, password in sorted(opts.security_doc()["users"].items()):
        if any(ch in f"{name}{password}" for ch in ',[]="\\ '):
            raise ValueError(
                f"SCRAM user {name!r}: StorageTool's --add-scram cannot carry , [ ] = \" \\ or spaces"
            )
        args += ["--add-scram", f"{opts.sasl_mechanism}=[name={name},password={password}]"]
    return args


def render_properties(props: dict[str, str]) -> str:
    """Java properties text (values escaped the way java.util.Properties reads them)."""

    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n")

    return "".join(f"{key}={escape(value)}\n" for key, value in props.items())
