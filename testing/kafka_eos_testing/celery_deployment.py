"""A distributed Airflow on loopback: CeleryExecutor, Redis, and workers that share nothing on disk.

    python -m kafka_eos_testing.celery_deployment   # foreground, Ctrl-C stops

What runs (each process in its own session, its output in ``<root>/<name>.log``):

- ``redis-server`` from the system's packages (Debian: ``apt-get install redis-server``; ``./run
  test`` installs it when missing): the Celery broker and result backend;
- the control plane in ``<root>/control`` (its AIRFLOW_HOME): ``db migrate`` on SQLite, then
  api-server, scheduler (CeleryExecutor), dag-processor and triggerer;
- one ``airflow celery worker`` per entry of ``workers`` (name -> queue), each with its own
  AIRFLOW_HOME, working directory and TMPDIR under ``<root>/worker-<name>``, serving only its
  queue. A worker reaches the rest only through the API server (task state, connections,
  XCom), Redis, Kafka and the manifest store: a file one worker writes is never seen by another.

Connections are created in the metadata database through the REST API (:meth:`add_connection`),
never put into a worker's environment: a worker gets them the way a production worker does.
Every wait polls with a deadline; ``stop()`` sends SIGTERM, then SIGKILL after 30 s.
Test-only: nothing in the provider imports this module.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafka_eos_testing.airflow_rest import AirflowRestClient, free_port, make_metadata_db, wait_for

__all__ = ["CeleryDeployment", "RedisServer", "free_port", "wait_for"]

CONTROL_SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")


def _stop_processes(processes: Mapping[str, subprocess.Popen]) -> None:
    for process in processes.values():
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    for process in processes.values():
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _start(command: list[str], *, env: Mapping[str, str], cwd: Path, log: Path) -> subprocess.Popen:
    with open(log, "wb") as fh:  # the child keeps its own descriptor
        return subprocess.Popen(command, env=dict(env), cwd=cwd, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)


class RedisServer:
    """``redis-server`` on 127.0.0.1, in memory only (no RDB, no AOF), in ``directory``."""

    def __init__(self, directory: Path, *, timeout_s: float = 30.0) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server was not found: install it (Debian/Ubuntu: apt-get install -y "
                               "redis-server; ./run test does it when run as root)")
        directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}"
        self.log = directory / "redis.log"
        self.process = _start(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(directory)],
            env=os.environ, cwd=directory, log=self.log,
        )
        wait_for(f"redis-server on port {self.port}", self._pong, timeout_s, self._raise_if_dead,
                 lambda: self.log.read_text(errors="replace")[-2000:])

    def _pong(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    def _raise_if_dead(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"redis-server exited with {self.process.returncode}: {self.log}")

    def stop(self) -> None:
        _stop_processes({"redis": self.process})


class CeleryDeployment(AirflowRestClient):
    """The control plane, Redis and the Celery workers; a small REST client for the API server."""

    def __init__(self, root: Path, *, dags_folder: Path, workers: Mapping[str, str],
                 settings: Mapping[str, str] | None = None, worker_concurrency: int = 1,
                 db_template: Path | None = None) -> None:
        self.root = root
        self.db_template = db_template  # a migrated airflow.db to copy (airflow_rest.make_metadata_db)
        self.dags_folder = dags_folder
        self.workers = dict(workers)
        self.settings = dict(settings or {})
        self.worker_concurrency = worker_concurrency
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.control_home = root / "control"
        self.processes: dict[str, subprocess.Popen] = {}
        self.redis: RedisServer | None = None
        self._token: str | None = None
        self._jwt_secret = secrets.token_hex(32)

    # -- processes ------------------------------------------------------------------------------

    def worker_home(self, name: str) -> Path:
        return self.root / f"worker-{name}"

    def _common_env(self, home: Path) -> dict[str, str]:
        """What every process is told: its own home and temp dir; the shared services' addresses."""
        assert self.redis is not None
        # Nothing of the test's own Airflow, AWS or Kafka-eos configuration leaks into a service.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_", "AWS_", "KAFKA_EOS_"))}
        tmp = home / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        env.update({
            "AIRFLOW_HOME": str(home),
            "TMPDIR": str(tmp),
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.control_home / 'airflow.db'}",
            "AIRFLOW__CELERY__BROKER_URL": f"{self.redis.url}/0",
            "AIRFLOW__CELERY__RESULT_BACKEND": f"{self.redis.url}/1",
            "AIRFLOW__CELERY__SYNC_PARALLELISM": "1",
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__CORE__AUTH_MANAGER":
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base}/execution/",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API_AUTH__JWT_SECRET": self._jwt_secret,
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        })
        env.update(self.settings)
        return env

    def start(self, *, timeout_s: float = 240.0) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.control_home.mkdir(exist_ok=True)
        self.redis = RedisServer(self.root / "redis")
        control_env = self._common_env(self.control_home)
        make_metadata_db(self.control_home, control_env, self.db_template)
        for name in CONTROL_SERVICES:
            self.processes[name] = _start([sys.executable, "-m", "airflow", name], env=control_env,
                                          cwd=self.control_home, log=self.root / f"{name}.log")
        for name, queue in self.workers.items():
            home = self.worker_home(name)
            home.mkdir(parents=True, exist_ok=True)
            command = [sys.executable, "-m", "airflow", "celery", "worker", "--queues", queue,
                       "--concurrency", str(self.worker_concurrency), "--celery-hostname", f"{name}@%h",
                       "--skip-serve-logs", "--without-mingle", "--without-gossip"]
            self.processes[f"worker-{name}"] = _start(command, env=self._common_env(home), cwd=home,
                                                      log=self.root / f"worker-{name}.log")
        wait_for("the API server", lambda: self.request("GET", "/monitor/health"), timeout_s,
                 self.raise_if_a_service_died, self.log_tails)

    def stop(self) -> None:
        _stop_processes(self.processes)
        if self.redis is not None:
            self.redis.stop()

    def __enter__(self) -> CeleryDeployment:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def raise_if_a_service_died(self) -> None:
        dead = {name: p.returncode for name, p in self.processes.items() if p.poll() is not None}
        if dead:
            raise RuntimeError(f"services exited: {dead}\n{self.log_tails()}")

    def log_tails(self, lines: int = 30) -> str:
        parts = []
        for name in self.processes:
            path = self.root / f"{name}.log"
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {name}.log ---\n" + "\n".join(tail))
        return "\n".join(parts)

    def task_log_files(self, worker: str, dag_id: str, run_id: str, task_id: str) -> list[Path]:
        """The log files of one task in one worker's home (empty: that worker never ran it)."""
        folder = self.worker_home(worker) / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}"
        folder = folder / f"task_id={task_id}"
        return sorted(folder.rglob("*.log")) if folder.exists() else []

    # -- REST API -------------------------------------------------------------------------------

    def add_connection(self, conn_id: str, conn_type: str, **fields: Any) -> None:
        """A connection in the metadata database (workers read it through the API server)."""
        body = {"connection_id": conn_id, "conn_type": conn_type, **fields}
        if isinstance(body.get("extra"), dict):
            body["extra"] = json.dumps(body["extra"])
        self.request("POST", "/connections", json=body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_eos_testing.celery_deployment",
        description="Airflow with CeleryExecutor on loopback: Redis, the control plane and two workers "
                    "(queues 'spark' and 'kafka'), in the foreground until Ctrl-C.")
    parser.add_argument("--root", type=Path, default=None, help="state folder (default: a new temp dir)")
    parser.add_argument("--dags-folder", type=Path, default=Path(__file__).resolve().parents[2] / "dags")
    args = parser.parse_args(argv)
    root = args.root or Path(tempfile.mkdtemp(prefix="kafka-eos-celery-"))
    stop = {"now": False}

    def on_signal(*_: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with CeleryDeployment(root, dags_folder=args.dags_folder, workers={"a": "spark", "b": "kafka"},
                          settings={"AIRFLOW__OPERATORS__DEFAULT_QUEUE": "kafka"}) as deployment:
        print(f"API server {deployment.base}; state in {root}; Redis {deployment.redis.url}", flush=True)
        while not stop["now"]:
            deployment.raise_if_a_service_died()
            time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
