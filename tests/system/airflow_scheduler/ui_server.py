"""The Airflow of the UI tests: one API server and one dag-processor, no scheduler (nothing runs).

Shared by ``test_ui_api_server.py``'s request-level cases and the browser cases it imports
(``ui_browser_cases.py``), so Airflow starts once for both. The repository's ``dags/`` is the dags
folder (the trigger forms need the example DAGs parsed; DAGs start paused), with Airflow's simple
auth manager and two users: ``admin`` and ``viewer`` (a viewer may not read connections).
"""

from __future__ import annotations

import json
import os
import pathlib
import secrets
import subprocess
import sys
from collections.abc import Iterator

import httpx
from airflow_stack import REPO, AirflowStack, example_dag_settings, free_port, wait_for

from kafka_eos_testing.airflow_rest import make_metadata_db

PASSWORDS = {"admin": secrets.token_hex(8), "viewer": secrets.token_hex(8)}
SERVICES = ("api-server", "dag-processor")


def token(stack: AirflowStack, user: str) -> str:
    response = httpx.post(f"{stack.base}/auth/token", json={"username": user, "password": PASSWORDS[user]},
                          timeout=10)
    response.raise_for_status()
    return response.json()["access_token"]


def run_ui_server(bootstrap: str, home: pathlib.Path, db_template: pathlib.Path | None = None
                  ) -> Iterator[AirflowStack]:
    """Start, yield once the API answers a login, stop (a generator for a fixture)."""
    (home / "manifests").mkdir(exist_ok=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_"))}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__CORE__AUTH_MANAGER": (
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
            ),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
            "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",  # Airflow's default is Disabled
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            # Parse each file once, one at a time: the parse competes with the API server's start
            # for the CPU, and nothing here edits a DAG file.
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600",
            **example_dag_settings(home, bootstrap),
        }
    )
    (home / "passwords.json").write_text(json.dumps(PASSWORDS))
    stack = AirflowStack(home, env, port)
    make_metadata_db(home, env, db_template)
    for service in SERVICES:
        with open(home / f"{service}.log", "wb") as log:
            # cwd outside the repository: its egg-info would make the plugin's entry point appear twice.
            stack.processes[service] = subprocess.Popen(
                [sys.executable, "-m", "airflow", service], env=env, cwd=home, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
    try:
        stack._token = wait_for("the API server", lambda: token(stack, "admin"), 240, stack)
        yield stack
    finally:
        stack.stop()
