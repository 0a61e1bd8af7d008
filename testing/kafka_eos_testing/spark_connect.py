"""A local Spark Connect server on loopback, started from the pip PySpark distribution.

    python -m kafka_eos_testing.spark_connect          # foreground; prints the sc:// URL to use

No start script ships in the wheel, but the server's jar does (``pyspark/jars/spark-connect_*.jar``),
so the server is ``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer``
with its gRPC endpoint bound to 127.0.0.1 on a free port. Its Python workers run this interpreter
(``PYSPARK_PYTHON``), so the executors import what this environment has installed; the server needs
``grpcio``, ``grpcio-status``, ``googleapis-common-protos`` and ``zstandard`` (``pyspark[connect]``,
all of which ``pyspark-client`` also requires).

Why not ``SparkSession.builder.remote("local[2]")``: that in-process server binds every interface,
needs a token and hangs when its port changes (measured with PySpark 4.2.0). One
server per test session; each client session is stopped after use (its artifacts are fixed per
session). Test-only: nothing in the provider imports this module.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import socket
import sys
from collections.abc import Iterator
from typing import Any

from kafka_eos_testing.launched import LaunchedServer, free_port

__all__ = ["CONNECT_SERVER_CLASS", "SparkConnectServer"]

CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class SparkConnectServer(LaunchedServer):
    """One Spark Connect server process on 127.0.0.1; ``stop()`` (or the context manager) ends it.

    ``url`` is the ``sc://`` address a client session takes (``SparkSession.builder.remote(url)``).
    ``master`` defaults to ``local[2,2]``: 2 cores, and up to 2 attempts per task (local mode retries
    a failed task only when the master names a failure count; the kill tests need the retry).
    ``start_timeout_s`` bounds the readiness wait (a cold start takes ~30 s on a loaded 2-core machine).
    """

    what = "the Spark Connect server"
    stop_timeout_s = 30.0
    poll_interval_s = 0.5

    def __init__(self, *, master: str = "local[2,2]", log_path: pathlib.Path | None = None,
                 start_timeout_s: float = 180.0, conf: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self.log_path = log_path
        settings = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.driver.memory": "768m",
            **(conf or {}),
        }
        command = [str(pathlib.Path(sys.executable).with_name("spark-submit")),
                   "--class", CONNECT_SERVER_CLASS, "--master", master]
        for key, value in settings.items():
            command += ["--conf", f"{key}={value}"]
        command.append("spark-internal")
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        self._launch(command, start_timeout_s=start_timeout_s, env=env)

    def _ready(self) -> bool:
        """A client session answers a query (the port alone opens before the session can)."""
        if not self._port_open():
            return False
        with contextlib.suppress(Exception), connect_mode_restored():
            session = self.session()
            try:
                session.range(1).collect()
                return True
            finally:
                session.stop()
        return False

    def _port_open(self) -> bool:
        with socket.socket() as sock:
            sock.settimeout(1)
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def session(self) -> Any:
        """A new client session (stop it after use: artifacts added to it cannot be replaced)."""
        from pyspark.sql import SparkSession

        return SparkSession.builder.remote(self.url).create()


# PySpark sets this process-wide when a Connect session is created, and while it is set a classic
# ``getOrCreate`` in the same process refuses (CONNECT_URL_NOT_SET): the probe above, and every test
# fixture that makes Connect sessions, put it back as they found it.
CONNECT_MODE_ENV = "SPARK_CONNECT_MODE_ENABLED"


@contextlib.contextmanager
def connect_mode_restored() -> Iterator[None]:
    """Within: Connect sessions; after: ``SPARK_CONNECT_MODE_ENABLED`` as it was before."""
    before = os.environ.get(CONNECT_MODE_ENV)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CONNECT_MODE_ENV, None)
        else:
            os.environ[CONNECT_MODE_ENV] = before


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--master", default="local[2,2]")
    args = parser.parse_args(argv)
    with SparkConnectServer(master=args.master) as server:
        print(f"Spark Connect server ready in {server.startup_s:.1f} s: {server.url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            server.process.wait()


if __name__ == "__main__":
    main()
