"""A real Airflow, as ``airflow standalone`` runs it: scheduler, triggerer, dag-processor, api-server.

LocalExecutor on SQLite in a throw-away AIRFLOW_HOME, the repository's ``dags/`` as the dags
folder, the embedded Kafka broker as the cluster, the API on a free loopback port. Every process
is started in its own session, its output goes to a log file in AIRFLOW_HOME (shown when a test
fails), and all of them are stopped when the module is done (SIGTERM, then SIGKILL after 30 s).
Every wait polls with a deadline.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pathlib
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafka_eos_testing.airflow_rest import AirflowRestClient, free_port, make_metadata_db
from kafka_eos_testing.airflow_rest import wait_for as shared_wait_for
from kafka_eos_testing.embedded import unique_name

REPO = pathlib.Path(__file__).resolve().parents[3]
SERVICES = ("api-server", "dag-processor", "scheduler", "triggerer")


def wait_for(what: str, check: Callable[[], Any], timeout: float, stack: AirflowStack | None = None) -> Any:
    """Poll ``check`` until truthy; with ``stack``: fail at once when a service died, logs at the deadline."""
    if stack is None:
        return shared_wait_for(what, check, timeout)
    return stack.wait(what, check, timeout)


class AirflowStack(AirflowRestClient):
    """The running services and a small REST client for them."""

    def __init__(self, home: pathlib.Path, env: dict[str, str], port: int) -> None:
        self.home, self.env, self.port = home, env, port
        self.base = f"http://127.0.0.1:{port}"
        self.processes: dict[str, subprocess.Popen] = {}
        # Services started with other arguments than ``airflow <name>`` (the soak's Celery workers).
        self.commands: dict[str, list[str]] = {}
        self._token: str | None = None

    # -- processes -------------------------------------------------------------------------

    def start(self, db_template: pathlib.Path | None = None) -> None:
        """The database (a copy of ``db_template``, else migrated), then the four services."""
        make_metadata_db(self.home, self.env, db_template)
        for name in SERVICES:
            self.start_service(name)

    def start_service(self, name: str) -> None:
        """Start one service (again: after the soak's nemesis killed it), its log appended to."""
        log = open(self.home / f"{name}.log", "ab")  # noqa: SIM115 (the child holds its own descriptor)
        self.processes[name] = subprocess.Popen(
            [sys.executable, "-m", "airflow", *self.commands.get(name, [name])],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)

    def raise_if_a_service_died(self) -> None:
        dead = {name: p.returncode for name, p in self.processes.items() if p.poll() is not None}
        if dead:
            raise AssertionError(f"Airflow services exited: {dead}\n{self.log_tails()}")

    def defer_exit_processed(self, dag_id: str, run_id: str, task_id: str) -> bool:
        """Whether the scheduler has taken in the executor's event for a try that deferred.

        Airflow 3.3 fails a resumed deferred task when that event is processed only after the
        trigger fired and the resumed try is already running (apache/airflow#72716, fix open as
        #72767): a test that makes the trigger fire waits for this first, as a user cannot.
        """
        path = self.home / "scheduler.log"
        if not path.exists():
            return False
        wanted = f"TaskInstance Finished: dag_id={dag_id}, task_id={task_id}, run_id={run_id},"
        return any(wanted in line and "state=deferred" in line
                   for line in path.read_text(errors="replace").splitlines())

    def log_tails(self, lines: int = 40) -> str:
        parts = []
        for name in SERVICES:
            path = self.home / f"{name}.log"
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {name}.log (last {len(tail)} lines) ---\n" + "\n".join(tail))
        return "\n".join(parts)

    # -- REST API --------------------------------------------------------------------------

    def trigger_with_cli(self, dag_id: str, conf: dict[str, Any]) -> str:
        """``airflow dags trigger --conf`` as a user types it (no logical date); the new run's id."""
        before = {r["dag_run_id"] for r in self.runs(dag_id)}
        command = [sys.executable, "-m", "airflow", "dags", "trigger", dag_id, "--conf", json.dumps(conf)]
        subprocess.run(command, env=self.env, check=True, capture_output=True, timeout=180)
        new = [r["dag_run_id"] for r in self.runs(dag_id) if r["dag_run_id"] not in before]
        assert len(new) == 1, new
        return new[0]


def stack_environment(home: pathlib.Path, port: int, kafka_extra: dict[str, Any]) -> dict[str, str]:
    """The services' environment: this process's minus its Airflow settings, plus a LocalExecutor
    Airflow in ``home`` serving on ``port``, whose ``kafka_eos_default`` connection holds
    ``kafka_extra`` (with ``home/manifests`` as the manifest store)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_"))}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__CORE__AUTH_MANAGER": (
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
            ),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
            # One Fernet key for every service. Without it each takes the key of the airflow.cfg the
            # first of them writes, or none when it read the file before: the triggerer then cannot
            # decrypt the kwargs of a trigger the scheduler wrote (a deadline's callback) and exits.
            "AIRFLOW__CORE__FERNET_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "AIRFLOW_CONN_KAFKA_EOS_DEFAULT": json.dumps(
                {
                    "conn_type": "kafka_eos",
                    "extra": {
                        **kafka_extra,
                        "manifest_base_uri": (home / "manifests").as_uri(),  # the cleanup DAG's store
                    },
                }
            ),
            "AIRFLOW_CONN_SPARK_LOCAL": '{"conn_type": "spark", "host": "local[2]"}',
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PATH": os.pathsep.join([str(pathlib.Path(sys.executable).parent), os.environ.get("PATH", "")]),
        }
    )
    return env


@pytest.fixture(scope="module")
def airflow_stack(kafka_broker, airflow_db_template, tmp_path_factory) -> Iterator[AirflowStack]:
    """The four services for one test module (started once: they take about a minute to come up)."""
    home = tmp_path_factory.mktemp("airflow-home")
    (home / "manifests").mkdir()  # the connection's manifest store (the cleanup DAG refuses a missing one)
    port = free_port()
    env = stack_environment(home, port, {"bootstrap.servers": kafka_broker.bootstrap})
    stack = AirflowStack(home, env, port)
    stack.env.update(example_dag_settings(home, kafka_broker.bootstrap))
    stack.start(airflow_db_template)
    try:
        wait_for("the API server", lambda: stack.request("GET", "/monitor/health"), 240, stack)
        yield stack
    finally:
        stack.stop()


# Settings the example DAGs read from the environment when the dag-processor parses them.
SCHEDULED_PREFIX = unique_name("sched-quiet") + "-"  # nothing lingers under it: the scheduled run waits
PIPELINE_TOPIC = unique_name("scheduler-per-user")
DEADLINE_FRACTION = 0.02


def example_dag_settings(home: pathlib.Path, bootstrap: str) -> dict[str, str]:
    return {
        "KAFKA_EOS_CLEANUP_PREFIXES": SCHEDULED_PREFIX,
        "KAFKA_EOS_CLEANUP_POLL_SECONDS": "2",
        "KAFKA_EOS_MANIFEST_BASE_URI": (home / "manifests").as_uri(),
        "KAFKA_EOS_PIPELINE_SCHEDULE": "none",
        "KAFKA_EOS_PIPELINE_TOPIC": PIPELINE_TOPIC,
        "KAFKA_EOS_PIPELINE_BOOTSTRAP_SERVERS": bootstrap,
        "KAFKA_EOS_PIPELINE_INPUT_DIR": str(home / "input"),
        # Two runs of one batch at once must still write it once (the input claim decides).
        "KAFKA_EOS_PIPELINE_MAX_ACTIVE_RUNS": "2",
        # The transaction deadline 18 s (0.02 x 900 s) after a run was queued, so a test sees it fire;
        # a longer run's alert only reads its store and logs (test_real_scheduler.py).
        "KAFKA_EOS_PIPELINE_DEADLINE_FRACTION": str(DEADLINE_FRACTION),
    }
