"""Start and stop the embedded broker (``kafka-eos-devbroker``) as a subprocess.

Used by the pytest fixtures, the demo and the benchmarks alike, so all of them start the broker
exactly as a user would, over the real TCP path. Nothing here needs pytest.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0

# fixture/factory option -> command-line flag of kafka-eos-devbroker
_FLAGS = {
    "partitions": "--partitions",
    "default_partitions": "--partitions",
    "data_dir": "--data-dir",
    "transaction_max_timeout_ms": "--transaction-max-timeout-ms",
    "abort_check_interval_ms": "--abort-check-interval-ms",
    "transaction_version": "--transaction-version",
    "acl_file": "--acl-file",
    "transactional_id_expiration_ms": "--transactional-id-expiration-ms",
    "node_id": "--node-id",
    "marker_delay_ms": "--marker-delay-ms",
    "socket_request_max_bytes": "--socket-request-max-bytes",
    "max_connections": "--max-connections",
}
_SWITCHES = {"two_phase_commit": "--two-phase-commit"}
_NEGATED_SWITCHES = {
    "auto_create_topics": "--no-auto-create-topics",
    "transaction_partition_verification": "--no-transaction-partition-verification",
}


def unique_name(prefix: str = "t") -> str:
    """A topic / transactional id / group name no other test (or earlier run) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def broker_command(options: dict[str, Any], port: int = 0) -> list[str]:
    """The ``kafka-eos-devbroker`` command line for these options (TypeError on unknown ones)."""
    cmd = [
        sys.executable,
        "-m",
        "kafka_eos_testing.broker.cli",
        "--listen",
        f"127.0.0.1:{port}",
    ]
    for key, value in options.items():
        if key in _FLAGS:
            if value is not None:
                cmd += [_FLAGS[key], str(value)]
        elif key in _SWITCHES:
            if value:
                cmd.append(_SWITCHES[key])
        elif key in _NEGATED_SWITCHES:
            if not value:
                cmd.append(_NEGATED_SWITCHES[key])
        elif key != "log_level":
            known = sorted({*_FLAGS, *_SWITCHES, *_NEGATED_SWITCHES})
            raise TypeError(f"unknown broker option {key!r}; known: {', '.join(known)}")
    cmd += ["--log-level", str(options.get("log_level", "INFO"))]
    return cmd


def log_tail(path: str | os.PathLike[str], lines: int = 40) -> str:
    """The last ``lines`` lines of a broker's log file (what a failed start or test shows)."""
    try:
        with open(path, errors="replace") as fh:
            return "".join(fh.readlines()[-lines:])
    except OSError:
        return "(no log)"


class BrokerHandle:
    """A broker the tests talk to: ``.bootstrap``, ``.embedded``, ``.config``, stop/start/restart.

    ``kind`` says which: ``external`` (this class: a cluster the tests only connect to),
    ``embedded`` or ``apache`` (``kafka_eos_testing/apache_kafka``).
    """

    kind = "external"

    def __init__(self, bootstrap: str, embedded: bool, config: dict[str, Any]) -> None:
        self.bootstrap = bootstrap
        self.embedded = embedded
        self.config = dict(config)

    def client_config(self, **extra: Any) -> dict[str, Any]:
        """librdkafka config for this broker (bootstrap only; add SASL settings yourself)."""
        return {"bootstrap.servers": self.bootstrap, **extra}

    def sasl_config(self, user: str, password: str, **extra: Any) -> dict[str, Any]:
        """librdkafka config for a SASL/PLAIN user of a broker started with an ``acl_file``."""
        return self.client_config(
            **{
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": user,
                "sasl.password": password,
                **extra,
            }
        )

    def _needs_embedded(self, what: str) -> None:
        import pytest  # only a test ever holds a handle on a real cluster

        pytest.skip(f"needs {what}: the real cluster at ${BOOTSTRAP_ENV} cannot be restarted by the tests")

    def start(self) -> None:
        self._needs_embedded("a broker start")

    def stop(self) -> None:
        self._needs_embedded("a broker stop")

    def restart(self) -> None:
        self._needs_embedded("a broker restart")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.bootstrap!r}, embedded={self.embedded})"


class EmbeddedBroker(BrokerHandle):
    """``kafka-eos-devbroker`` in a subprocess; restarts keep its port (and, with data_dir, its data)."""

    kind = "embedded"

    def __init__(self, options: dict[str, Any], log_path: str) -> None:
        super().__init__("", True, options)
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.start()

    def start(self) -> None:
        if self.process is not None and self.process.poll() is None:
            return
        cmd = broker_command(self.config, self.port)
        with open(self.log_path, "ab") as log_file:
            self.process = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=log_file, stdin=subprocess.DEVNULL
            )
        line = self._read_listening_line()
        self.bootstrap = line.removeprefix("listening on ").strip()
        self.port = int(self.bootstrap.rsplit(":", 1)[1])
        # Nothing else should come on stdout, but a full pipe would block the broker: keep draining it.
        threading.Thread(target=self._drain_stdout, args=(self.process,), daemon=True).start()

    def _drain_stdout(self, process: subprocess.Popen) -> None:
        stdout = process.stdout
        try:
            while stdout is not None and (chunk := os.read(stdout.fileno(), 65536)):
                with open(self.log_path, "ab") as log_file:
                    log_file.write(chunk)
        except (OSError, ValueError):
            pass  # the pipe was closed by stop()/kill()

    def _read_listening_line(self) -> str:
        assert self.process is not None and self.process.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        buffer = b""
        try:
            while b"\n" not in buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    break
                if selector.select(timeout=min(remaining, 0.5)):
                    chunk = os.read(self.process.stdout.fileno(), 4096)
                    if not chunk:
                        break
                    buffer += chunk
        finally:
            selector.close()
        line = buffer.decode(errors="replace").splitlines()[0] if b"\n" in buffer else ""
        if not line.startswith("listening on "):
            self.kill()
            raise RuntimeError(
                f"kafka-eos-devbroker did not start within {START_TIMEOUT_S:.0f} s "
                f"(printed {buffer!r}); its log:\n{self.log_tail()}"
            )
        return line

    def running(self) -> bool:
        """The broker process is alive."""
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)

    def stop(self) -> None:
        """SIGTERM and wait (the broker exits 0); SIGKILL after a deadline."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.process = None

    def kill(self) -> None:
        """SIGKILL: a crash, for tests of what survives one (with data_dir)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


def start_embedded_broker(
    options: dict[str, Any] | None = None, log_dir: str | None = None
) -> EmbeddedBroker:
    """Start a broker subprocess outside pytest (scripts, benchmarks)."""
    log_dir = log_dir or tempfile.mkdtemp(prefix="kafka-eos-broker-")
    return EmbeddedBroker(dict(options or {}), os.path.join(log_dir, "broker.log"))
