"""The provider's UI in a real browser: Debian's Chromium driven by Playwright, on a real Airflow 3.3.

These cases run inside ``test_ui_api_server.py`` (imported there), so they share its API server and
dag-processor (one start for both: Airflow takes most of a minute to come up) and its simple auth
manager; one browser for the module, logged in once through Airflow's login page as ``admin``.
What a user does, checked on screen:

- Admin > Connections > Add "Kafka (exactly-once)": the provider's fields are there and saved;
- the Test button of a stored connection: green with the capability summary; red naming the cause;
- ``eos_pipeline``'s trigger form: titled params, a run created from it with the typed batch;
- the operators' view: a PREPARED and a COMMITTED checkpoint, a commit-pending and an orphan
  transaction, and the orphan's pre-filled ``eos_manual_resolution`` request triggered from it.

The browser is the system Chromium (``/usr/bin/chromium``, or ``KAFKA_EOS_CHROMIUM``), never a
downloaded one; without it, or without the ``playwright`` package, the module is skipped naming
which. ``KAFKA_EOS_UI_SCREENSHOTS=<dir>`` keeps the screenshots (docs/img holds the committed ones).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from airflow_stack import AirflowStack, wait_for
from ui_server import PASSWORDS

from kafka_eos_testing.embedded import unique_name

CHROMIUM = os.environ.get("KAFKA_EOS_CHROMIUM", "/usr/bin/chromium")
# Chromium's own traffic (updates, sync, QUIC probes) off: the pass talks to loopback only.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
UI_TIMEOUT_MS = 30_000  # every wait on the page is bounded by this (Playwright's auto-waiting)


def _require_browser() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is missing (the test dependency group has it: ./run installs it)")
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium; ./run test installs it)")
    return sync_playwright


@pytest.fixture(scope="module", name="page")
def browser_page(api_server, tmp_path_factory) -> Iterator[Any]:
    """One Chromium for the module (a fresh profile), logged in through Airflow's login page."""
    sync_playwright = _require_browser()
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1100, "height": 860},
        )
        context.set_default_timeout(UI_TIMEOUT_MS)
        from playwright.sync_api import expect as playwright_expect

        playwright_expect.set_options(timeout=UI_TIMEOUT_MS)
        try:
            tab = context.new_page()
            tab.goto(f"{api_server.base}/")
            tab.get_by_label("Username").fill("admin")
            tab.get_by_label("Password").fill(PASSWORDS["admin"])
            tab.get_by_role("button", name="Sign in").click()
            tab.wait_for_url(f"{api_server.base}/")
            yield tab
        finally:
            context.close()


def _shot(target: Any, name: str) -> None:
    """Keep a screenshot when KAFKA_EOS_UI_SCREENSHOTS names a folder (docs/img for the docs)."""
    folder = os.environ.get("KAFKA_EOS_UI_SCREENSHOTS")
    if folder:
        pathlib.Path(folder).mkdir(parents=True, exist_ok=True)
        target.screenshot(path=str(pathlib.Path(folder) / f"ui-{name}.png"))


def expect(locator: Any) -> Any:
    """Playwright's retrying assertions (bounded by UI_TIMEOUT_MS), imported once the module runs."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def _stored_connection(stack: AirflowStack, extra: dict[str, Any]) -> str:
    conn_id = unique_name("eos_ui").replace("-", "_")
    stack.request("POST", "/connections", json={"connection_id": conn_id, "conn_type": "kafka_eos",
                                                "extra": json.dumps(extra)})
    return conn_id


def _show_only(page: Any, stack: AirflowStack, conn_id: str) -> Any:
    """The connection list filtered to one connection; its row."""
    page.goto(f"{stack.base}/connections")
    page.get_by_placeholder("Search Connections").fill(conn_id)
    row = page.get_by_role("row").filter(has_text=conn_id)
    row.wait_for()
    return row


def test_the_connection_form_shows_the_providers_fields_and_saves_them(
    page, api_server, kafka_broker, tmp_path
):
    conn_id = unique_name("eos_form").replace("-", "_")
    page.goto(f"{api_server.base}/connections")
    page.get_by_role("button", name="Add Connection").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("Connection ID").fill(conn_id)
    dialog.get_by_role("combobox").first.fill("Kafka (exactly")
    page.keyboard.press("Enter")
    assert dialog.get_by_label("SASL username").is_visible()
    assert dialog.get_by_label("SASL password").get_attribute("type") == "password"  # masked
    dialog.get_by_role("button", name="Extra Fields", exact=True).click()
    for label in ("Bootstrap servers", "Manifest store URI", "Security protocol", "SASL mechanism",
                  "TLS CA file", "TLS client certificate file", "TLS client key file",
                  "Two-phase commit (KIP-939)", "Transaction timeout (ms)"):
        dialog.get_by_text(label, exact=True).wait_for()
    assert dialog.get_by_text("PLAINTEXT (default)").is_visible()  # the blank choice is named, not "null"
    dialog.locator("[id='element_bootstrap.servers']").fill(kafka_broker.bootstrap)
    dialog.locator("[id='element_manifest_base_uri']").fill(tmp_path.as_uri())
    _shot(page, "connection-form")
    dialog.get_by_role("button", name="Save").click()
    dialog.wait_for(state="hidden")
    stored = wait_for("the saved connection",
                      lambda: api_server.request("GET", f"/connections/{conn_id}"), 30)
    extra = json.loads(stored["extra"])
    assert stored["conn_type"] == "kafka_eos"
    assert extra["bootstrap.servers"] == kafka_broker.bootstrap
    assert extra["manifest_base_uri"] == tmp_path.as_uri()


def test_the_test_button_is_green_with_the_capability_summary(page, api_server, kafka_broker, tmp_path):
    conn_id = _stored_connection(
        api_server, {"bootstrap.servers": kafka_broker.bootstrap, "manifest_base_uri": tmp_path.as_uri()}
    )
    row = _show_only(page, api_server, conn_id)
    row.get_by_role("button", name="Test Connection").click()
    toast = page.locator("[data-type=success]").filter(has_text="Test Connection Successful")  # a green toast
    toast.wait_for()
    text = toast.inner_text()
    assert f"Connected to {kafka_broker.bootstrap}: transaction.version" in text
    assert f"manifest store {tmp_path.as_uri()}: readable" in text
    _shot(page, "test-button")


def test_the_test_button_names_the_failure(page, api_server):
    conn_id = _stored_connection(api_server, {"bootstrap.servers": "127.0.0.1:1"})
    row = _show_only(page, api_server, conn_id)
    row.get_by_role("button", name="Test Connection").click()
    toast = page.locator("[data-type=error]").filter(has_text="127.0.0.1:1")  # a red toast
    toast.wait_for()
    assert "broker-unreachable" in toast.inner_text()


def test_eos_pipeline_is_triggered_from_its_form(page, api_server):
    batch = "20260301T100000"
    wait_for("eos_pipeline to be parsed", lambda: api_server.request("GET", "/dags/eos_pipeline"), 240,
             api_server)
    before = {r["dag_run_id"] for r in api_server.runs("eos_pipeline")}
    page.goto(f"{api_server.base}/dags/eos_pipeline")
    page.get_by_role("button", name="Trigger Dag").click()
    dialog = page.get_by_role("dialog")
    for title in ("Pipeline id", "Output topic", "Input folder", "Batch", "Manifest store",
                  "Spark partitions", "Reprocess"):  # a required field's label ends with "*"
        dialog.get_by_text(re.compile(rf"^{title}\s*\*?$")).first.wait_for()
    dialog.get_by_text("One sub-folder of JSON event files per batch", exact=False).wait_for()
    dialog.locator("[id='element_batch']").fill(batch)
    _shot(page, "trigger-form")
    dialog.get_by_role("button", name="Trigger", exact=True).click()
    dialog.wait_for(state="hidden")
    new = wait_for(
        "the run triggered from the form",
        lambda: [r for r in api_server.runs("eos_pipeline") if r["dag_run_id"] not in before], 30,
    )
    assert len(new) == 1 and new[0]["run_type"] == "manual"
    assert new[0]["conf"]["batch"] == batch
    assert new[0]["conf"]["pipeline_id"] == "user_activity"  # the form's defaults went with it


@pytest.fixture(scope="module")
def view_connection(api_server, kafka_broker, tmp_path_factory) -> dict[str, Any]:
    """A store with a PREPARED and a COMMITTED checkpoint; a transaction no manifest lists (an orphan)."""
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from kafka_eos_testing.transactions import produce_transaction, write_prepared_manifest

    base = tmp_path_factory.mktemp("ui-view-store").as_uri()
    pipeline, topic = unique_name("uipipe").replace("-", "_"), unique_name("ui-view-topic")
    first, second, orphan = f"{pipeline}-0-1", f"{pipeline}-0-2", f"{pipeline}-1-9"
    # Open for as long as the module may take: the cases that read them run minutes apart, past the
    # client's 60 s default, after which the broker would abort them.
    open_ms = 900_000
    produce_transaction(kafka_broker.bootstrap, first, topic, [b"a", b"b"], transaction_timeout_ms=open_ms)
    produce_transaction(kafka_broker.bootstrap, second, topic, [b"c"], transaction_timeout_ms=open_ms)
    produce_transaction(kafka_broker.bootstrap, orphan, topic, [b"x"], partitions=[0],
                        transaction_timeout_ms=open_ms)
    config = KafkaClientConfig.from_mapping({"bootstrap.servers": kafka_broker.bootstrap})
    with TransactionAdmin(config) as admin:
        committed = write_prepared_manifest(admin, base, pipeline, topic, [first], checkpoint_id=1)
        write_prepared_manifest(admin, base, pipeline, topic, [second], checkpoint_id=2)
        commit_checkpoint(admin, committed, committed_by="test")
        described = admin.describe([orphan])
    conn_id = _stored_connection(
        api_server, {"bootstrap.servers": kafka_broker.bootstrap, "manifest_base_uri": base}
    )
    return {"conn_id": conn_id, "pipeline": pipeline, "orphan": orphan, "pending": second,
            "orphan_state": described[orphan]}


def test_the_operators_view_lists_checkpoints_and_open_transactions(page, api_server, view_connection):
    conn_id, pipeline = view_connection["conn_id"], view_connection["pipeline"]
    page.goto(f"{api_server.base}/kafka-eos/?conn_id={conn_id}&prefixes={pipeline}-#checkpoint-{pipeline}-2")
    checkpoints = page.locator("table").nth(0)
    assert checkpoints.locator(f"#checkpoint-{pipeline}-2 td").nth(2).inner_text() == "PREPARED"
    assert checkpoints.locator(f"#checkpoint-{pipeline}-1 td").nth(2).inner_text() == "COMMITTED"
    transactions = page.locator("table").nth(1)
    pending = transactions.get_by_role("row").filter(has_text=view_connection["pending"])
    orphan = transactions.get_by_role("row").filter(has_text=view_connection["orphan"])
    # transactional_id, action, kind, age_s, partitions, ...
    assert pending.locator("td").nth(2).inner_text() == "commit-pending"
    assert orphan.locator("td").nth(2).inner_text() == "orphan"
    assert orphan.locator("td").nth(4).inner_text().endswith("-0")  # the partition whose LSO it holds
    assert pending.get_by_role("link", name="eos_manual_resolution: commit-from-manifest").is_visible()
    assert orphan.get_by_role("link", name="eos_manual_resolution: abort").is_visible()
    _shot(page, "operators-view")


def test_an_open_transaction_opens_a_prefilled_resolution_and_triggers_it(page, api_server, view_connection):
    wait_for("eos_manual_resolution to be parsed",
             lambda: api_server.request("GET", "/dags/eos_manual_resolution"), 240, api_server)
    conn_id, pipeline = view_connection["conn_id"], view_connection["pipeline"]
    orphan = view_connection["orphan"]
    state = view_connection["orphan_state"]
    before = {r["dag_run_id"] for r in api_server.runs("eos_manual_resolution")}
    page.goto(f"{api_server.base}/kafka-eos/?conn_id={conn_id}&prefixes={pipeline}-")
    row = page.locator("table").nth(1).get_by_role("row").filter(has_text=orphan)
    row.get_by_role("link", name="eos_manual_resolution: abort").click()
    form = page.locator("form#resolve")
    assert form.locator("select[name=action]").input_value() == "abort"
    assert [o.get_attribute("value") for o in form.locator("option").all()] == ["abort", "describe"]
    assert form.locator("input[name=transactional_id]").input_value() == orphan
    assert form.locator("input[name=producer_id]").input_value() == str(state.producer_id)
    assert form.locator("input[name=epoch]").input_value() == str(state.producer_epoch)
    assert form.locator("input[name=dry_run]").is_checked()  # a dry run until the operator unticks it
    form.get_by_role("button", name="Trigger eos_manual_resolution").click()
    link = page.locator("#outcome a")
    link.wait_for()
    _shot(page, "resolve-form")
    run_id = link.inner_text().removeprefix("Triggered: ")
    assert run_id not in before
    run = api_server.run("eos_manual_resolution", run_id)
    assert run["conf"] == {"action": "abort", "transactional_id": orphan, "producer_id": state.producer_id,
                           "epoch": state.producer_epoch, "dry_run": True}
    assert run["triggering_user_name"] == "admin"


def test_a_link_cannot_offer_what_the_classification_forbids(page, api_server, view_connection):
    """An abort of a commit-pending transaction, typed into the URL, is refused by name (nothing sent)."""
    conn_id, pending = view_connection["conn_id"], view_connection["pending"]
    page.goto(f"{api_server.base}/kafka-eos/resolve?conn_id={conn_id}&kind=commit-pending&action=abort"
              f"&transactional_id={pending}")
    error = page.locator(".error")
    assert "action 'abort' is not offered for a commit-pending transaction" in error.inner_text()
    assert page.locator("form#resolve").count() == 0



def _start_dags_test(stack: AirflowStack, dag_id: str, conf: dict[str, Any], conn_id: str,
                     log: pathlib.Path) -> subprocess.Popen:
    """``airflow dags test`` on the server's metadata database: it runs the DAG itself and parks a
    human-in-the-loop task in ``awaiting_input`` until the Required Actions page answers it (no
    scheduler here: the UI's Airflow has none)."""
    env = {**stack.env, "KAFKA_EOS_RESOLUTION_CONN_ID": conn_id}
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "airflow", "dags", "test", dag_id, "--conf", json.dumps(conf)],
            env=env, cwd=stack.home, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )


def _parked_run(stack: AirflowStack, manifest_uri: str) -> dict[str, Any] | None:
    """The resolution run for this manifest once its ``approve`` task awaits an answer."""
    for run in stack.runs("eos_manual_resolution"):
        if run["conf"].get("manifest_uri") == manifest_uri:
            states = stack.task_states("eos_manual_resolution", run["dag_run_id"])
            return run if states.get("approve") == "awaiting_input" else None
    return None


def test_giving_up_a_checkpoint_waits_for_approve_on_the_required_actions_page(
        page, api_server, kafka_broker, tmp_path):
    """The manual resolution DAG's approval step, answered where a person answers it.

    Giving up a PREPARED checkpoint loses its batch: the run parks its ``approve`` task, the
    question (subject and the risk) is on the task's Required Actions page, nothing has reached
    Kafka while it waits, and Approve lets ``resolve`` abort the checkpoint's transaction and mark
    it ABORTED. The committed checkpoint beside it stays, each of its keys once."""
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint
    from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, read_manifest
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from kafka_eos_testing.transactions import produce_transaction, write_prepared_manifest
    from kafka_eos_testing.verify import assert_exactly_once, count_keys

    base = tmp_path.as_uri()
    pipeline, topic = unique_name("uiapprove").replace("-", "_"), unique_name("ui-approve-topic")
    kept, given_up = f"{pipeline}-0-1", f"{pipeline}-0-2"
    # Open past the client's 60 s default: `airflow dags test` takes its time to park the run.
    for tid, key in ((kept, b"kept"), (given_up, b"given-up")):
        produce_transaction(kafka_broker.bootstrap, tid, topic, [key], transaction_timeout_ms=900_000)
    config = KafkaClientConfig.from_mapping({"bootstrap.servers": kafka_broker.bootstrap})
    with TransactionAdmin(config) as admin:
        committed = write_prepared_manifest(admin, base, pipeline, topic, [kept], checkpoint_id=1)
        prepared = write_prepared_manifest(admin, base, pipeline, topic, [given_up], checkpoint_id=2)
        commit_checkpoint(admin, committed, committed_by="test")
        conn_id = _stored_connection(
            api_server, {"bootstrap.servers": kafka_broker.bootstrap, "manifest_base_uri": base})
        conf = {"action": "abort", "manifest_uri": prepared, "dry_run": False}
        log = tmp_path / "dags-test.log"
        process = _start_dags_test(api_server, "eos_manual_resolution", conf, conn_id, log)
        try:
            run = wait_for("the run parked on its approval", lambda: _parked_run(api_server, prepared),
                           180, api_server)
            page.goto(f"{api_server.base}/dags/eos_manual_resolution/runs/{run['dag_run_id']}"
                      "/tasks/approve/required_actions")
            # The subject names the whole checkpoint (its URI's colon once cut it short), the body the risk.
            expect(page.get_by_text(f"Approve abort? It gives up checkpoint {prepared}", exact=True)
                   ).to_be_visible()
            risk = "its batch is lost unless the input is written again"
            expect(page.get_by_text(risk).first).to_be_visible()
            _shot(page, "approval")
            # Asked before anything was sent: the checkpoint's transaction is still open.
            assert admin.describe([given_up])[given_up].state == "Ongoing"
            assert read_manifest(prepared).status == ManifestStatus.PREPARED
            page.get_by_test_id("hitl-option-Approve").click()
            assert process.wait(timeout=180) == 0, log.read_text(errors="replace")
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
        assert api_server.task_states("eos_manual_resolution", run["dag_run_id"]) == {
            "approve": "success", "resolve": "success"}
        assert read_manifest(prepared).status == ManifestStatus.ABORTED
        assert admin.describe([given_up])[given_up].state != "Ongoing"
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [b"kept"])
