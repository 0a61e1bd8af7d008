"""Apache Kafka 4.4 on loopback: 1 or 3 combined broker+controller JVMs in KRaft mode.

``ApacheKafkaCluster(options)`` formats the storage of each node (``kafka.tools.StorageTool``)
when it is new, starts the JVMs and returns once every node answers Metadata with the whole
cluster and a transactional producer can initialise (so the transaction coordinator is
loaded). It is a :class:`~kafka_eos_testing.embedded.BrokerHandle`, so tests
written for the embedded broker use it unchanged: ``stop()``/``start()``/``restart()`` keep
the data dir and the ports, and so every record and every open transaction.

Layout of the data dir: ``cluster.json`` (cluster id and controller ports, reused on restart)
and per node ``node-N/`` with ``server.properties``, ``server.log`` (the JVM's whole output)
and ``data/`` (``log.dirs``). Nothing is written to the terminal.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import secrets
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any

from kafka_eos_testing.embedded import BrokerHandle, log_tail

from .errors import KafkaStartError
from .jars import fetch_jars
from .options import MTLS_ADMIN_DN, KafkaOptions, node_properties, render_properties, scram_format_arguments

START_TIMEOUT_ENV = "KAFKA_EOS_KAFKA_START_TIMEOUT_S"
START_TIMEOUT_S = float(os.environ.get(START_TIMEOUT_ENV, "120"))
STOP_TIMEOUT_S = 30.0
FORMAT_TIMEOUT_S = 90.0
READY_PROBE_ID = "kafka-eos-launcher-ready"
_INTERNAL_USER = "kafka-eos-node"
_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = out
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
logger.controller.name = kafka.controller
logger.controller.level = INFO
"""


@dataclass
class KafkaNode:
    """One JVM: its id, client port, controller port and directory."""

    node_id: int
    host: str
    port: int
    controller_port: int
    directory: pathlib.Path
    process: subprocess.Popen | None = None
    internal_port: int = 0  # the INTERNAL listener of the secured modes (options.INTERNAL_LISTENER)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def probe_address(self) -> str:
        """Where the launcher itself talks to the node: INTERNAL when there is one, else the client port."""
        return f"127.0.0.1:{self.internal_port}" if self.internal_port else self.address

    @property
    def log_path(self) -> pathlib.Path:
        return self.directory / "server.log"

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _new_cluster_id() -> str:
    """A Kafka cluster id (base64url of 16 random bytes); like ``Uuid.randomUuid`` never one
    starting with '-', which command-line parsers take for an option."""
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not candidate.startswith("-"):
            return candidate


def _port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class ApacheKafkaCluster(BrokerHandle):
    """A real Kafka 4.4 cluster of ``options.nodes`` nodes; started by the constructor."""

    kind = "apache"

    def __init__(self, options: KafkaOptions | dict[str, Any] | None = None, *, start: bool = True) -> None:
        opts = (
            options if isinstance(options, KafkaOptions) else KafkaOptions.from_mapping(dict(options or {}))
        )
        opts.validate()
        super().__init__("", False, dict(options) if isinstance(options, dict) else {})
        self.options = opts
        self.owns_data_dir = opts.data_dir is None
        self.data_dir = pathlib.Path(opts.data_dir or tempfile.mkdtemp(prefix="kafka-eos-kafka-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.nodes: list[KafkaNode] = []
        self._internal_user = (_INTERNAL_USER, secrets.token_urlsafe(18)) if opts.secured else None
        self._acls_applied = False
        self.tls_dir = self.data_dir / "tls"
        self.certificate_authority: Any = None  # certs.CertificateAuthority of a TLS mode, made per run
        self._tls_files: dict[str, str] | None = None
        self._mtls_admin: Any = None
        if start:
            self.start()

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start every node not running (formatting new storage) and wait until the cluster is ready."""
        if self.nodes and all(node.running() for node in self.nodes):
            return
        classpath = fetch_jars()
        if not self.nodes:
            self.nodes = self._plan_nodes()
        self._make_certificates()
        self._write_configs()
        self.bootstrap = ",".join(node.address for node in self.nodes)
        try:
            self._format(classpath)
            for node in self.nodes:
                if not node.running():
                    self._spawn(node, classpath)
            self._wait_ready(time.monotonic() + START_TIMEOUT_S)
            if not self._acls_applied and self.options.secured:
                self._apply_acls(time.monotonic() + START_TIMEOUT_S)
                self._acls_applied = True
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """SIGTERM every node at once (a clean, controlled shutdown), SIGKILL after a deadline."""
        running = [node for node in self.nodes if node.running()]
        for node in running:
            node.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for node in running:
            self._reap(node, deadline)

    def restart(self) -> None:
        self.stop()
        self.start()

    def kill(self) -> None:
        """SIGKILL every node: a crash of the whole cluster (data stays in the data dir)."""
        for node in self.nodes:
            self.kill_node(node.node_id)

    def stop_node(self, node_id: int) -> None:
        node = self.node(node_id)
        if node.running():
            node.process.send_signal(signal.SIGTERM)
            self._reap(node, time.monotonic() + STOP_TIMEOUT_S)

    def kill_node(self, node_id: int) -> None:
        node = self.node(node_id)
        if node.running():
            node.process.kill()
            node.process.wait()
        node.process = None

    def start_node(self, node_id: int) -> None:
        """Start one stopped node again and wait until it answers Metadata with the whole cluster."""
        node = self.node(node_id)
        if node.running():
            return
        self._spawn(node, fetch_jars())
        try:
            running = [n for n in self.nodes if n.running()]
            self._wait_metadata(node, time.monotonic() + START_TIMEOUT_S, running)
        except BaseException:
            self.stop_node(node_id)
            raise

    def running(self) -> bool:
        """Every node's JVM is alive."""
        return bool(self.nodes) and all(node.running() for node in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no node {node_id}; nodes are {[n.node_id for n in self.nodes]}")

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(f"--- node {n.node_id} ({n.log_path})\n{n.log_tail(lines)}" for n in self.nodes)

    # -- clients ---------------------------------------------------------------------------

    def admin_config(self, **extra: Any) -> dict[str, Any]:
        """librdkafka config of a super user (the nodes' own SASL user on a secured cluster).

        In the TLS / mTLS / SCRAM modes it is the mode's own super user on the client listener:
        ``admin`` (SCRAM, from the users) or the launcher's ``CN=admin`` client certificate.
        """
        opts = self.options
        if opts.mtls:
            return self.mtls_config(self._mtls_admin, **extra)
        if opts.internal_listener and opts.uses_sasl and opts.sasl_mechanism == "OAUTHBEARER":
            return PlainAdmin.config(self, **extra)  # tokens come from the test's identity provider
        if opts.internal_listener and opts.uses_sasl:
            users = opts.security_doc()["users"]
            name = next((u for u in ("admin", *sorted(users)) if u in users), None)
            if name is not None:
                return self.sasl_config(name, users[name], **extra)
        if self._internal_user:
            return PlainAdmin.config(self, **extra)
        return self.client_config(**extra)

    def client_config(self, **extra: Any) -> dict[str, Any]:
        """librdkafka config of the client listener: bootstrap, plus the protocol and CA of a TLS mode."""
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap}
        if self.options.uses_tls:
            config["security.protocol"] = "SSL"
            config["ssl.ca.location"] = self._tls_files["ca"] if self._tls_files else ""
        return {**config, **extra}

    def sasl_config(self, user: str, password: str, **extra: Any) -> dict[str, Any]:
        """librdkafka config of a SASL user on the client listener (its protocol and mechanism)."""
        return self.client_config(
            **{
                "security.protocol": self.options.client_protocol
                if self.options.uses_sasl
                else "SASL_PLAINTEXT",
                "sasl.mechanism": self.options.sasl_mechanism,
                "sasl.username": user,
                "sasl.password": password,
                **extra,
            }
        )

    def issue_client_certificate(self, common_name: str, *, organization: str | None = "kafka-eos") -> Any:
        """A client certificate signed by this run's CA (mTLS); its ``subject`` is the principal's name."""
        if self.certificate_authority is None:
            raise KafkaStartError("client certificates need a TLS mode (tls or mtls)")
        stem = f"client-{common_name}".replace("/", "_")
        return self.certificate_authority.issue(
            stem, common_name=common_name, client=True, organization=organization
        )

    def mtls_config(self, issued: Any, **extra: Any) -> dict[str, Any]:
        """librdkafka config presenting ``issued`` (from :meth:`issue_client_certificate`)."""
        return self.client_config(
            **{
                "ssl.certificate.location": str(issued.cert),
                "ssl.key.location": str(issued.key),
                **extra,
            }
        )

    def _node_config(self, node: KafkaNode, **extra: Any) -> dict[str, Any]:
        if self.options.internal_listener:
            config = PlainAdmin.config(self, **extra) if self._internal_user else {**extra}
            config["bootstrap.servers"] = node.probe_address
            return config
        config = self.admin_config(**extra)
        config["bootstrap.servers"] = node.address
        return config

    def _make_certificates(self) -> None:
        """This run's CA and every node's certificate (its host, localhost, 127.0.0.1); once per object."""
        if not self.options.uses_tls or self._tls_files is not None:
            return
        from .certs import CertificateAuthority

        ca = CertificateAuthority(self.tls_dir, name=f"kafka-eos test CA {self.data_dir.name}")
        names = sorted({n.host for n in self.nodes} | {"localhost", "127.0.0.1"})
        server = ca.issue("server", common_name="kafka-eos-node", names=tuple(names))
        self.certificate_authority = ca
        self._tls_files = {"ca": str(ca.ca_file), "keystore": str(server.bundle)}
        if self.options.mtls:
            cn, _, org = MTLS_ADMIN_DN.partition(",O=")
            self._mtls_admin = ca.issue("client-admin", common_name=cn[3:], client=True, organization=org)

    # -- internals -------------------------------------------------------------------------

    def _plan_nodes(self) -> list[KafkaNode]:
        """Node ids, ports and directories: client ports from ``listen`` (0 = free), controller
        ports reused from ``cluster.json`` when still free (a restart keeps its quorum addresses)."""
        state = self._load_state()
        stored = {n["node_id"]: n["controller_port"] for n in state.get("nodes", [])}
        listen = self.options.listen or [("127.0.0.1", 0)] * self.options.nodes
        nodes = []
        for index, (host, port) in enumerate(listen):
            node_id = index + 1
            controller_port = stored.get(node_id, 0)
            if not controller_port or not _port_is_free("127.0.0.1", controller_port):
                controller_port = free_port()
            nodes.append(
                KafkaNode(
                    node_id=node_id,
                    host=host,
                    port=port or free_port(host),
                    controller_port=controller_port,
                    directory=self.data_dir / f"node-{node_id}",
                    internal_port=free_port() if self.options.internal_listener else 0,
                )
            )
        state["nodes"] = [{"node_id": n.node_id, "controller_port": n.controller_port} for n in nodes]
        if "cluster_id" not in state:
            state["cluster_id"] = _new_cluster_id()
        (self.data_dir / "cluster.json").write_text(json.dumps(state, indent=2) + "\n")
        return nodes

    def _load_state(self) -> dict[str, Any]:
        try:
            return json.loads((self.data_dir / "cluster.json").read_text())
        except FileNotFoundError:
            return {}
        except (OSError, json.JSONDecodeError) as exc:
            raise KafkaStartError(f"cannot read {self.data_dir / 'cluster.json'}: {exc}") from exc

    @property
    def cluster_id(self) -> str:
        return self._load_state()["cluster_id"]

    def _write_configs(self) -> None:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        for node in self.nodes:
            node.directory.mkdir(parents=True, exist_ok=True)
            props = node_properties(
                self.options,
                node_id=node.node_id,
                host=node.host,
                port=node.port,
                controller_port=node.controller_port,
                voters=voters,
                log_dir=str(node.directory / "data"),
                internal_user=self._internal_user,
                internal_port=node.internal_port,
                tls_files=self._tls_files,
            )
            path = node.directory / "server.properties"
            # The file may hold SASL passwords: only the owner reads it.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(render_properties(props))
            (node.directory / "log4j2.properties").write_text(
                _LOG4J2.format(level=self.options.log_level.upper())
            )

    def _java(self, node: KafkaNode, classpath: str, main: list[str], heap: str) -> list[str]:
        return [
            "java",
            f"-Xmx{heap}",
            "-Xms32m",
            "-XX:+UseSerialGC",
            # C1 only: a test node lives for seconds to minutes, and on a small machine C2's
            # compiler threads more than double the start time (8 s instead of 20-30 s under load)
            "-XX:TieredStopAtLevel=1",
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={node.directory / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={node.directory}",
            # Kafka 4.x fetches OAUTHBEARER JWKS / token URLs only from this allow-list.
            *(
                [f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={self.options.oidc_jwks_url}"]
                if self.options.oidc_jwks_url
                else []
            ),
            "-cp",
            classpath,
            *main,
        ]

    def _format(self, classpath: str) -> None:
        """Format each node whose storage is new (all at once: each is a JVM start)."""
        pending = []
        for node in self.nodes:
            if (node.directory / "data" / "meta.properties").exists():
                continue
            command = self._java(
                node,
                classpath,
                [
                    "kafka.tools.StorageTool",
                    "format",
                    "--config",
                    str(node.directory / "server.properties"),
                    f"--cluster-id={self.cluster_id}",
                    "--feature",
                    f"transaction.version={self.options.transaction_version}",
                    *self._scram_argfile(node),
                ],
                "128m",
            )
            log = open(node.directory / "format.log", "wb")  # noqa: SIM115 - closed below
            pending.append((node, subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), log))
        deadline = time.monotonic() + FORMAT_TIMEOUT_S
        failures = []
        for node, process, log in pending:
            try:
                code = process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                code = process.wait()
            log.close()
            if code != 0:
                tail = (node.directory / "format.log").read_text(errors="replace").strip().splitlines()[-15:]
                failures.append(f"node {node.node_id}: StorageTool format exited {code}:\n" + "\n".join(tail))
        if failures:
            raise KafkaStartError(f"cannot format KRaft storage in {self.data_dir}:\n" + "\n".join(failures))

    def _scram_argfile(self, node: KafkaNode) -> list[str]:
        """SCRAM users for ``--add-scram`` in an @file only the owner reads (never in argv): StorageTool's
        argument parser (argparse4j) reads it, one argument per line, taken literally."""
        arguments = scram_format_arguments(self.options)
        if not arguments:
            return []
        path = node.directory / "format-scram.args"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write("".join(f"{argument}\n" for argument in arguments))
        return [f"@{path}"]

    def _spawn(self, node: KafkaNode, classpath: str) -> None:
        command = self._java(
            node, classpath, ["kafka.Kafka", str(node.directory / "server.properties")], self.options.heap
        )
        with open(node.log_path, "ab") as log:
            # Its own session: a Ctrl-C in the terminal reaches the launcher, which stops nodes cleanly.
            node.process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def _reap(self, node: KafkaNode, deadline: float) -> None:
        assert node.process is not None
        try:
            node.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            node.process.kill()
            node.process.wait()
        node.process = None

    def _check_alive(self, nodes: list[KafkaNode] | None = None) -> None:
        """Raise (with that node's port and log) as soon as any of ``nodes`` (default: all) has exited."""
        for node in self.nodes if nodes is None else nodes:
            if node.process is None or node.process.poll() is not None:
                code = None if node.process is None else node.process.returncode
                raise KafkaStartError(
                    f"Kafka node {node.node_id} (port {node.port}) exited with code {code} while starting; "
                    f"the last lines of {node.log_path}:\n{node.log_tail(30)}"
                )

    def _not_ready(self, node: KafkaNode, what: str) -> KafkaStartError:
        return KafkaStartError(
            f"Kafka node {node.node_id} (port {node.port}) {what} within {START_TIMEOUT_S:.0f} s "
            f"(${START_TIMEOUT_ENV} sets the limit); the last lines of {node.log_path}:\n{node.log_tail(30)}"
        )

    def _wait_metadata(self, node: KafkaNode, deadline: float, among: list[KafkaNode] | None = None) -> None:
        """Poll until the node accepts connections and its Metadata lists every node of ``among``
        (default: all nodes); any of them exiting ends the wait with its log."""
        among = self.nodes if among is None else among
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        while not _accepts(node.host, node.port):
            self._check_alive(among)
            if time.monotonic() > deadline:
                raise self._not_ready(node, "did not accept connections")
            time.sleep(0.2)
        admin = AdminClient(self._node_config(node, **{"log_level": 2}))
        wanted = {n.node_id for n in among}
        while True:
            self._check_alive(among)
            try:
                metadata = admin.list_topics(timeout=2)
                if set(metadata.brokers) >= wanted:
                    return
            except KafkaException:
                pass
            if time.monotonic() > deadline:
                raise self._not_ready(node, f"did not list all {len(wanted)} node(s) in Metadata")
            time.sleep(0.2)

    def _wait_ready(self, deadline: float) -> None:
        """Every node lists every node; then the transaction coordinator is ready on every node.

        "A transactional producer could initialise" is checked piece by piece so that no
        transactional id is left behind (a fresh cluster lists no transactions, as a fresh
        embedded broker does): FindCoordinator for a transactional id answers NONE (this creates
        ``__transaction_state``), every node's ListTransactions answers NONE (none of its
        coordinator partitions is still loading), and InitProducerId without a transactional id
        gets a producer id (the controller hands out id blocks).
        """
        from kafka.protocol.admin.transactions import ListTransactionsRequest
        from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
        from kafka.protocol.producer.transaction import InitProducerIdRequest

        for node in self.nodes:
            self._wait_metadata(node, deadline)
        checks = [
            (self.nodes[0], FindCoordinatorRequest(key=READY_PROBE_ID, key_type=1), 3, "FindCoordinator"),
            *[
                (
                    node,
                    ListTransactionsRequest(state_filters=[], producer_id_filters=[]),
                    0,
                    "ListTransactions",
                )
                for node in self.nodes
            ],
            (
                self.nodes[0],
                InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
                3,
                "InitProducerId",
            ),
        ]
        for node, request, version, name in checks:
            last = None
            while True:
                self._check_alive()
                last = self._probe_error(node, request, version)
                if last == 0:
                    break
                if time.monotonic() > deadline:
                    raise KafkaStartError(
                        f"the transaction coordinator was not ready on node {node.node_id} "
                        f"(port {node.port}) "
                        f"within {START_TIMEOUT_S:.0f} s: {name} answered {last}; "
                        f"the last lines of {node.log_path}:\n{node.log_tail(30)}"
                    )
                time.sleep(0.2)

    def _probe_error(self, node: KafkaNode, request: Any, version: int) -> Any:
        """The request's top-level error code on ``node`` (a connection problem is its text)."""
        from kafka_eos_testing.broker.txn_testkit import WireProbe

        try:
            with WireProbe(node.probe_address, sasl_plain=self._internal_user) as probe:
                response = probe.send(request, version=version)
        except (OSError, ConnectionError) as exc:
            return f"{type(exc).__name__}: {exc}"
        if hasattr(response, "coordinators") and response.coordinators:
            return response.coordinators[0].error_code
        return response.error_code

    def _apply_acls(self, deadline: float) -> None:
        """Create the ACL file's ACLs (as the nodes' super user), then wait until every node enforces them."""
        from .security import apply_acls

        apply_acls(self, self.options.security_doc()["acls"], deadline)

    def __repr__(self) -> str:
        nodes, data_dir = self.options.nodes, str(self.data_dir)
        return f"ApacheKafkaCluster({self.bootstrap!r}, nodes={nodes}, data_dir={data_dir!r})"


class PlainAdmin:
    """The nodes' own SASL/PLAIN user (super user): the launcher's probes and the old SASL mode's admin."""

    @staticmethod
    def config(cluster: ApacheKafkaCluster, **extra: Any) -> dict[str, Any]:
        user, password = cluster._internal_user
        bootstrap = (
            ",".join(n.probe_address for n in cluster.nodes)
            if cluster.options.internal_listener
            else cluster.bootstrap
        )
        return {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": password,
            **extra,
        }
