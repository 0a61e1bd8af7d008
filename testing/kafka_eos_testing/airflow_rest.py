"""What every test deployment of Airflow shares: a free port, a deadline-bounded wait, and a small
client of Airflow 3's REST API (token from the simple auth manager, DAGs, runs, task instances,
task logs).

One owner for the two deployments that talk to a real api-server: the LocalExecutor stack of the
scheduler, UI and soak tests (``tests/system/airflow_scheduler/airflow_stack.py``) and the Celery
deployment (:mod:`kafka_eos_testing.celery_deployment`). Test-only: nothing in the provider
imports it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["DB_FILE", "AirflowRestClient", "free_port", "make_metadata_db", "wait_for"]

DB_FILE = "airflow.db"  # Airflow's default SQLite metadata database, in AIRFLOW_HOME


def make_metadata_db(home: Path, env: Mapping[str, str], template: Path | None = None, *,
                     timeout_s: float = 300) -> None:
    """The SQLite metadata database of a deployment whose AIRFLOW_HOME is ``home``.

    ``template``: an ``airflow.db`` that ``airflow db migrate`` already made in this test run
    (the ``airflow_db_template`` fixture), copied instead of migrating again: a migration is an
    Airflow start-up and the whole schema, tens of seconds on two loaded cores, and every
    deployment of a run needs the same empty, migrated database. Without one: ``airflow db migrate``.
    """
    if template is not None:
        shutil.copyfile(template, home / DB_FILE)
        return
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=dict(env), cwd=home, check=True,
                   capture_output=True, timeout=timeout_s)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(what: str, check: Callable[[], Any], timeout: float,
             on_poll: Callable[[], None] | None = None, describe: Callable[[], str] | None = None) -> Any:
    """Poll ``check`` until it returns something truthy; at the deadline raise naming ``what``.

    ``on_poll`` runs after each miss (e.g. fail at once when a service died); ``describe`` adds
    context to the timeout's message (e.g. the services' log tails)."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as err:  # a server not up yet; kept for the message
            last_error = err
        if on_poll is not None:
            on_poll()
        time.sleep(0.5)  # polling interval of a deadline-bounded wait
    detail = describe() if describe is not None else ""
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what} (last error: {last_error})\n"
                       f"{detail}")


class AirflowRestClient:
    """REST calls against ``self.base`` (``http://host:port``). A deployment subclasses it and
    provides :meth:`raise_if_a_service_died` and :meth:`log_tails`, used by every wait."""

    base: str
    _token: str | None = None

    def raise_if_a_service_died(self) -> None:
        """Raise when one of the deployment's services exited (the default knows none)."""

    def log_tails(self, lines: int = 40) -> str:
        """The services' last log lines, for a failure's message (the default knows none)."""
        return ""

    def wait(self, what: str, check: Callable[[], Any], timeout: float) -> Any:
        """:func:`wait_for` that fails at once when a service died and shows the logs at the deadline."""
        return wait_for(what, check, timeout, self.raise_if_a_service_died, self.log_tails)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        import httpx

        if self._token is None:
            response = httpx.get(f"{self.base}/auth/token", timeout=10)
            response.raise_for_status()
            self._token = response.json()["access_token"]
        headers = {"Authorization": f"Bearer {self._token}", **kwargs.pop("headers", {})}
        response = httpx.request(method, f"{self.base}/api/v2{path}", headers=headers, timeout=30, **kwargs)
        response.raise_for_status()
        return response.json() if response.content else None

    def unpause(self, dag_id: str, timeout_s: float = 240.0) -> None:
        self.wait(f"{dag_id} to be parsed", lambda: self.request("GET", f"/dags/{dag_id}"), timeout_s)
        self.request("PATCH", f"/dags/{dag_id}", json={"is_paused": False})

    def trigger(self, dag_id: str, conf: dict[str, Any]) -> str:
        """A manual run without a logical date (Airflow 3's default for the UI, the CLI and the API)."""
        run = self.request("POST", f"/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf})
        return run["dag_run_id"]

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return self.request("GET", f"/dags/{dag_id}/dagRuns", params={"order_by": "run_after"})["dag_runs"]

    def run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self.request("GET", f"/dags/{dag_id}/dagRuns/{run_id}")

    def task_instances(self, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
        tis = self.request("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {ti["task_id"]: ti for ti in tis}

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        return {task_id: ti["state"] for task_id, ti in self.task_instances(dag_id, run_id).items()}

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """The task's log as Airflow serves it (worker and triggerer parts), one text."""
        data = self.request(
            "GET",
            f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
            params={"full_content": True},
            headers={"Accept": "application/json"},
        )
        content = data.get("content", data) if isinstance(data, dict) else data
        if isinstance(content, list):
            return "\n".join(str(line.get("event", line)) if isinstance(line, dict) else str(line)
                             for line in content)
        return str(content)

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float) -> dict[str, Any]:
        def finished() -> dict[str, Any] | None:
            run = self.run(dag_id, run_id)
            return run if run["state"] in ("success", "failed") else None

        return self.wait(f"{dag_id} run {run_id} to finish", finished, timeout)
