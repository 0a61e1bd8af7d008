"""The connection Test button through a real Airflow 3.3 API server, with the bodies its UI posts.

Only the API server runs (no scheduler: nothing is scheduled here). The bodies are what the
3.3 React UI sends (read from its bundle): the add/edit form and the connection list post
``host: ""`` and ``port: 0`` (``Number("")`` / ``Number(null)``) for a type whose host and port
are hidden, and the list posts the stored password as its mask ``***``. Without the provider's
middleware (``ui/test_button.py``) a stored ``kafka_eos`` connection answers 400; the control
case shows Airflow still does exactly that for another type.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import httpx
import pytest
from airflow_stack import AirflowStack, free_port, wait_for

from airflow_provider_kafka_eos.testing.embedded import unique_name

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def api_server(kafka_broker, tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow-api-home")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_"))}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__AUTH_MANAGER": (
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
            ),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",  # Airflow's default is Disabled
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        }
    )
    stack = AirflowStack(home, env, port)
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, cwd=home, check=True,
                   capture_output=True, timeout=300)
    with open(home / "api-server.log", "wb") as log:
        # cwd outside the repository: its egg-info would make the plugin's entry point appear twice.
        stack.processes["api-server"] = subprocess.Popen(
            [sys.executable, "-m", "airflow", "api-server"], env=env, cwd=home, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        wait_for("the API server", lambda: stack.request("GET", "/monitor/health"), 240, stack)
        yield stack
    finally:
        stack.stop()


def _post_test(stack: AirflowStack, body: dict) -> httpx.Response:
    stack.request("GET", "/monitor/health")  # makes sure the token is fetched
    return httpx.post(f"{stack.base}/api/v2/connections/test", json=body, timeout=60,
                      headers={"Authorization": f"Bearer {stack._token}"})


def _form_body(conn_id: str, extra: dict, conn_type: str = "kafka_eos", password: str = "") -> dict:
    """What the 3.3 UI posts from the form or the list for a type with hidden host and port."""
    return {"connection_id": conn_id, "conn_type": conn_type, "description": "", "extra": json.dumps(extra),
            "host": "", "login": "", "password": password, "port": 0, "schema": ""}


def _form_extra(**values) -> dict:
    from airflow_provider_kafka_eos.hooks.connection_form import FIELDS

    return {**dict.fromkeys(FIELDS), **values}


def test_an_unsaved_connection_tests_from_the_form(api_server, kafka_broker):
    extra = _form_extra(**{"bootstrap.servers": kafka_broker.bootstrap})
    response = _post_test(api_server, _form_body(unique_name("eos_new").replace("-", "_"), extra))
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] is True, result
    assert result["message"].startswith(f"Connected to {kafka_broker.bootstrap}: transaction.version ")


def test_a_stored_connection_tests_from_the_list_and_the_form(api_server, kafka_broker, tmp_path):
    conn_id = unique_name("eos_stored").replace("-", "_")
    extra = _form_extra(
        **{"bootstrap.servers": kafka_broker.bootstrap, "manifest_base_uri": tmp_path.as_uri()}
    )
    api_server.request("POST", "/connections", json={"connection_id": conn_id, "conn_type": "kafka_eos",
                                                     "extra": json.dumps(extra), "login": "etl",
                                                     "password": "stored-secret"})
    stored = api_server.request("GET", f"/connections/{conn_id}")
    assert stored["host"] is None and stored["port"] is None
    response = _post_test(api_server, _form_body(conn_id, extra, password=stored["password"] or ""))
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] is True, result
    assert f"manifest store {tmp_path.as_uri()}: readable" in result["message"]
    assert "stored-secret" not in response.text


def test_a_stored_connection_that_cannot_connect_is_a_named_failure(api_server):
    conn_id = unique_name("eos_down").replace("-", "_")
    extra = _form_extra(**{"bootstrap.servers": "127.0.0.1:1"})
    api_server.request("POST", "/connections", json={"connection_id": conn_id, "conn_type": "kafka_eos",
                                                     "extra": json.dumps(extra)})
    response = _post_test(api_server, _form_body(conn_id, extra))
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] is False
    assert "127.0.0.1:1" in result["message"] and "broker-unreachable" in result["message"]


def test_airflow_itself_still_refuses_port_0_for_other_types(api_server):
    """The control: the 400 the middleware avoids is Airflow's, and only kafka_eos is exempted."""
    conn_id = unique_name("generic_stored").replace("-", "_")
    api_server.request("POST", "/connections", json={"connection_id": conn_id, "conn_type": "generic"})
    response = _post_test(api_server, _form_body(conn_id, {}, conn_type="generic"))
    assert response.status_code == 400
    assert "differs from the stored connection" in response.text
