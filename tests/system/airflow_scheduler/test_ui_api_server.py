"""The provider's UI parts through a real Airflow 3.3 API server: the Test button and the checkpoints view.

Only the API server and the dag-processor run (``ui_server.py``; no scheduler: nothing is
scheduled here), with Airflow's simple auth manager and two users: ``admin`` and ``viewer`` (a
viewer may not read connections). The browser cases (``ui_browser_cases.py``) are imported at the
end and run in this module, on the same server. The bodies are what the 3.3 React UI sends (read
from its bundle): the add/edit form and the connection list post ``host: ""`` and ``port: 0``
(``Number("")`` / ``Number(null)``) for a type whose host and port are hidden, and the list posts
the stored password as its mask ``***``. Without the provider's middleware
(``ui/test_button.py``) a stored ``kafka_eos`` connection answers 400; the control case shows
Airflow still does exactly that for another type.
"""

from __future__ import annotations

import json

import httpx
import pytest
from airflow_stack import AirflowStack
from ui_server import run_ui_server, token

from kafka_eos_testing.embedded import unique_name

# The UI's side; the hook's connection test runs on real Kafka in tests/operators/test_preflight_operator.py.
pytestmark = [pytest.mark.broker, pytest.mark.provider_logic]


@pytest.fixture(scope="module")
def api_server(kafka_broker, airflow_db_template, tmp_path_factory):
    yield from run_ui_server(kafka_broker.bootstrap, tmp_path_factory.mktemp("airflow-api-home"),
                             airflow_db_template)


def _token(stack: AirflowStack, user: str) -> str:
    return token(stack, user)


def _post_test(stack: AirflowStack, body: dict) -> httpx.Response:
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


# -- the checkpoints view (/kafka-eos/) ---------------------------------------------------------


@pytest.fixture(scope="module")
def store_connection(api_server, kafka_broker, tmp_path_factory):
    """A stored connection whose store holds one PREPARED and one COMMITTED checkpoint."""
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from kafka_eos_testing.transactions import produce_transaction, write_prepared_manifest

    base = tmp_path_factory.mktemp("view-store").as_uri()
    pipeline, topic = unique_name("viewpipe").replace("-", "_"), unique_name("view-topic")
    first, second = f"{pipeline}-0-1", f"{pipeline}-0-2"
    produce_transaction(kafka_broker.bootstrap, first, topic, [b"a", b"b"])
    produce_transaction(kafka_broker.bootstrap, second, topic, [b"c"])
    config = KafkaClientConfig.from_mapping({"bootstrap.servers": kafka_broker.bootstrap})
    with TransactionAdmin(config) as admin:
        committed = write_prepared_manifest(admin, base, pipeline, topic, [first], checkpoint_id=1)
        write_prepared_manifest(admin, base, pipeline, topic, [second], checkpoint_id=2)
        commit_checkpoint(admin, committed, committed_by="test")
    conn_id = unique_name("eos_view").replace("-", "_")
    extra = {"bootstrap.servers": kafka_broker.bootstrap, "manifest_base_uri": base}
    api_server.request("POST", "/connections", json={"connection_id": conn_id, "conn_type": "kafka_eos",
                                                     "extra": json.dumps(extra)})
    return {"conn_id": conn_id, "pipeline": pipeline, "base": base}


def _view(stack: AirflowStack, path: str, user: str | None = "admin", **params) -> httpx.Response:
    headers = {"Authorization": f"Bearer {_token(stack, user)}"} if user else {}
    return httpx.get(f"{stack.base}/kafka-eos{path}", params=params, headers=headers, timeout=60)


def test_the_view_lists_prepared_and_committed_checkpoints(api_server, store_connection):
    response = _view(api_server, "/api/checkpoints", conn_id=store_connection["conn_id"])
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["store"] == store_connection["base"]
    rows = [r for r in data["checkpoints"] if r["pipeline_id"] == store_connection["pipeline"]]
    assert [(r["checkpoint_id"], r["status"], r["transactions"]) for r in rows] == [
        (2, "PREPARED", 1), (1, "COMMITTED", 1)
    ]
    from airflow_provider_kafka_eos.kafka.checkpoints.manifest import manifest_uri

    base, pipeline = store_connection["base"], store_connection["pipeline"]
    assert [r["manifest"] for r in rows] == [manifest_uri(base, pipeline, 2), manifest_uri(base, pipeline, 1)]
    page = _view(api_server, "/", conn_id=store_connection["conn_id"])
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "<td>PREPARED</td>" in page.text and "<td>COMMITTED</td>" in page.text
    assert store_connection["pipeline"] in page.text


def test_the_view_lists_open_transactions_classified_with_their_partitions(
    api_server, kafka_broker, store_connection
):
    """The PREPARED checkpoint's transaction is commit-pending; a stray one under the prefix, an orphan."""
    from kafka_eos_testing.transactions import produce_transaction

    pipeline = store_connection["pipeline"]
    orphan = f"{pipeline}-1-9"
    produce_transaction(kafka_broker.bootstrap, orphan, unique_name("view-orphan"), [b"x"], partitions=[0])
    response = _view(api_server, "/api/transactions", conn_id=store_connection["conn_id"],
                      prefixes=f"{pipeline}-")
    assert response.status_code == 200, response.text
    rows = {r["transactional_id"]: r for r in response.json()["transactions"]}
    assert set(rows) == {f"{pipeline}-0-2", orphan}
    assert rows[f"{pipeline}-0-2"]["kind"] == "commit-pending"
    assert rows[f"{pipeline}-0-2"]["manifest_uri"].endswith("2.json")
    assert rows[orphan]["kind"] == "orphan" and rows[orphan]["partitions"].endswith("-0")
    page = _view(api_server, "/", conn_id=store_connection["conn_id"], prefixes=f"{pipeline}-")
    assert page.status_code == 200 and f"<td>{orphan}</td>" in page.text and "<td>orphan</td>" in page.text
    assert "<a href='runbook/orphaned-transaction'>" in page.text


def test_the_view_is_behind_airflows_permissions(api_server, store_connection):
    anonymous = _view(api_server, "/api/checkpoints", user=None, conn_id=store_connection["conn_id"])
    assert anonymous.status_code == 401
    denied = _view(api_server, "/api/checkpoints", user="viewer", conn_id=store_connection["conn_id"])
    assert denied.status_code == 403 and store_connection["conn_id"] in denied.text
    # The console's JSON (ui/console.py) has the same rule.
    pipeline = {"pipeline_id": store_connection["pipeline"]}
    for path, params in (("/api/pipelines", {}), ("/api/pipeline", pipeline)):
        url = f"{api_server.base}/kafka-eos-console{path}"
        query = {"conn_id": store_connection["conn_id"], **params}
        assert httpx.get(url, params=query, timeout=60).status_code == 401
        denied = httpx.get(url, params=query, timeout=60,
                           headers={"Authorization": f"Bearer {_token(api_server, 'viewer')}"})
        assert denied.status_code == 403 and store_connection["conn_id"] in denied.text
        allowed = httpx.get(url, params=query, timeout=60,
                            headers={"Authorization": f"Bearer {_token(api_server, 'admin')}"})
        assert allowed.status_code == 200, allowed.text


def test_an_unreadable_store_is_a_named_error_on_the_page(api_server, kafka_broker, tmp_path):
    conn_id = unique_name("eos_nostore").replace("-", "_")
    missing = (tmp_path / "no-store").as_uri()
    api_server.request("POST", "/connections", json={
        "connection_id": conn_id, "conn_type": "kafka_eos",
        "extra": json.dumps({"bootstrap.servers": kafka_broker.bootstrap, "manifest_base_uri": missing})})
    page = _view(api_server, "/", conn_id=conn_id)
    assert page.status_code == 503
    assert "Cannot read the checkpoints" in page.text
    assert "no-store" in page.text and "does not exist" in page.text
    assert not (tmp_path / "no-store").exists()  # nothing was created or changed


def test_the_runbook_is_rendered_in_airflow(api_server):
    from airflow_provider_kafka_eos import runbook

    index = _view(api_server, "/runbook/")
    assert index.status_code == 200
    assert all(f"href='{page}'" in index.text for page in runbook.pages())
    page = _view(api_server, "/runbook/orphaned-transaction")
    assert page.status_code == 200
    assert f"<h1>{runbook.title('orphaned-transaction')}</h1>" in page.text  # the page's own heading
    assert "<script" not in page.text
    assert _view(api_server, "/runbook/no-such-page").status_code == 404
    assert _view(api_server, "/runbook/orphaned-transaction", user=None).status_code == 401



def test_the_asset_page_lists_the_commit_task_as_the_topics_producer(api_server, kafka_broker):
    """Airflow 3.3 lists producers from declared outlets only (an alias creates no reference): the
    example pipeline's commit task declares its topic's Asset (event rule: tests/ui/test_links.py)."""
    from airflow_stack import PIPELINE_TOPIC, wait_for

    from airflow_provider_kafka_eos.assets.lineage import kafka_asset_uri

    uri = kafka_asset_uri(kafka_broker.bootstrap, PIPELINE_TOPIC)

    def the_asset() -> list:
        found = api_server.request("GET", "/assets", params={"uri_pattern": PIPELINE_TOPIC})["assets"]
        return [a for a in found if a["uri"] == uri]

    [asset] = wait_for(f"the Asset {uri} of the parsed example DAGs", the_asset, 240, api_server)
    assert [(t["dag_id"], t["task_id"]) for t in asset["producing_tasks"]] == [("eos_pipeline", "commit")]

# -- the same server in a real browser (Chromium + Playwright): ui_browser_cases.py ---------------
from ui_browser_cases import (  # noqa: E402  (collected here: one Airflow start for both)
    browser_page,  # noqa: F401  (the fixture `page`)
    test_a_link_cannot_offer_what_the_classification_forbids,  # noqa: F401
    test_an_open_transaction_opens_a_prefilled_resolution_and_triggers_it,  # noqa: F401
    test_eos_pipeline_is_triggered_from_its_form,  # noqa: F401
    test_giving_up_a_checkpoint_waits_for_approve_on_the_required_actions_page,  # noqa: F401
    test_the_connection_form_shows_the_providers_fields_and_saves_them,  # noqa: F401
    test_the_operators_view_lists_checkpoints_and_open_transactions,  # noqa: F401
    test_the_test_button_is_green_with_the_capability_summary,  # noqa: F401
    test_the_test_button_names_the_failure,  # noqa: F401
    view_connection,  # noqa: F401  (fixture)
)
from ui_console_cases import (  # noqa: E402  (the console, on the same server and browser)
    big_store,  # noqa: F401  (fixture)
    console_store,  # noqa: F401  (fixture)
    test_a_tasks_link_opens_its_checkpoint_and_the_pager_reaches_the_rest,  # noqa: F401
    test_each_plot_has_the_stores_points,  # noqa: F401
    test_the_console_is_reached_from_airflows_menu,  # noqa: F401
    test_the_console_loads_10000_checkpoints_in_under_2_s,  # noqa: F401
)
