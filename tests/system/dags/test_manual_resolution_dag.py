"""dags/eos_manual_resolution.py: one dag.test() per action of its Params form, plus a bad input."""

from __future__ import annotations

import json
import pathlib
import threading
import time

import pytest
from txn_helpers import (
    connect_admin,
    produce_in_transaction,
    set_kafka_eos_connection,
    states,
    write_prepared_manifest,
)

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, read_manifest
from kafka_eos_testing.embedded import unique_name
from kafka_eos_testing.verify import assert_exactly_once, count_keys

# The DAG's form and wiring; the actions it runs are the CLI's, tested on real Kafka in tests/cli.
pytestmark = [pytest.mark.dag, pytest.mark.broker, pytest.mark.provider_logic]

DAG_FILE = pathlib.Path(__file__).resolve().parents[3] / "dags" / "eos_manual_resolution.py"
BLANK_FORM = {
    "action": "list",
    "transactional_id": None,
    "producer_id": None,
    "epoch": None,
    "prefix": None,
    "manifest_uri": None,
    "manifest_base_uri": None,
    "unprotected": False,
    "dry_run": False,
}


@pytest.fixture(scope="module")
def manual_dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAG_FILE))
    assert bag.import_errors == {}
    return bag.get_dag("eos_manual_resolution")


@pytest.fixture
def world(kafka_broker, monkeypatch, tmp_path):
    """Open transactions under a fresh prefix: an orphan, a prepared one (in a manifest), one to commit.

    The connection's extra names the manifest store (the default the DAG's form falls back on).
    """
    set_kafka_eos_connection(monkeypatch, kafka_broker.bootstrap, manifest_base_uri=tmp_path.as_uri())
    prefix, topic = unique_name("manual") + "-", unique_name("topic")
    ids = {"orphan": f"{prefix}0", "pending": f"{prefix}1", "by_hand": f"{prefix}2"}
    for name, tid in ids.items():
        produce_in_transaction(kafka_broker.bootstrap, tid, topic, [name], commit=False)
    with connect_admin(kafka_broker.bootstrap) as admin:
        uri = write_prepared_manifest(
            admin, tmp_path.as_uri(), "orders", topic, [ids["pending"]], prefix=prefix
        )
        yield {
            "prefix": prefix,
            "topic": topic,
            "ids": ids,
            "manifest": uri,
            "base": tmp_path.as_uri(),
            "admin": admin,
        }
        leftovers = [t for t, s in states(admin, ids.values()).items() if s == "Ongoing"]
        admin.abort(leftovers)  # the broker is shared: leave nothing open behind


def run_form(dag, **form):
    """Trigger the DAG with this form; return (run state, the resolve task's XCom)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    run = dag.test(run_conf={**BLANK_FORM, **form})
    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(run_id=run.run_id, dag_ids=dag.dag_id, task_ids="resolve", key="return_value")
        ).first()
        value = None if row is None else row.value
    if isinstance(value, str):
        value = json.loads(value)
    return str(run.state), value


def test_list_shows_the_open_transactions_under_the_prefix(manual_dag, world):
    state, xcom = run_form(manual_dag, action="list", prefix=world["prefix"])
    assert state == "success"
    assert {r["transactional_id"]: r["state"] for r in xcom["rows"]} == dict.fromkeys(
        world["ids"].values(), "Ongoing"
    )


def test_describe_names_producer_and_epoch(manual_dag, world):
    tid = world["ids"]["orphan"]
    state, xcom = run_form(manual_dag, action="describe", transactional_id=tid)
    assert state == "success"
    [row] = xcom["rows"]
    expected = world["admin"].describe([tid])[tid]
    assert (row["transactional_id"], row["state"], row["producer_id"], row["producer_epoch"]) == (
        tid,
        "Ongoing",
        expected.producer_id,
        expected.producer_epoch,
    )


def test_abort_fences_the_orphan_and_refuses_the_prepared_one_by_default(
    kafka_broker, manual_dag, world, capfd
):
    ids = world["ids"]
    state, _ = run_form(manual_dag, action="abort", transactional_id=ids["orphan"])
    assert state == "success"
    for dry_run in (True, False):  # the dry run refuses with the same message
        state, _ = run_form(manual_dag, action="abort", transactional_id=ids["pending"], dry_run=dry_run)
        assert state == "failed"
        out, err = capfd.readouterr()
        assert (
            f"{ids['pending']}: refusing to abort: listed in PREPARED manifest {world['manifest']}"
            in out + err
        )
    assert states(world["admin"], [ids["orphan"], ids["pending"]]) == {
        ids["orphan"]: "Empty",
        ids["pending"]: "Ongoing",
    }
    state, _ = run_form(manual_dag, action="commit-from-manifest", manifest_uri=world["manifest"])
    assert state == "success"
    world["admin"].abort([ids["by_hand"]])
    assert_exactly_once(count_keys(kafka_broker.bootstrap, world["topic"]), [b"pending"])


def test_an_unreadable_store_refuses_and_aborts_nothing(kafka_broker, manual_dag, world, tmp_path, capfd):
    ids = world["ids"]
    missing = (tmp_path / "no-such-store").as_uri()
    state, _ = run_form(manual_dag, action="abort", prefix=world["prefix"], manifest_base_uri=missing)
    assert state == "failed"
    out, err = capfd.readouterr()
    assert f"manifest store {missing}" in out + err
    assert "kafka-eos-txn runbook manifest-store (" in out + err
    assert set(states(world["admin"], ids.values()).values()) == {"Ongoing"}
    world["admin"].abort([ids["orphan"], ids["by_hand"]])
    state, _ = run_form(manual_dag, action="commit-from-manifest", manifest_uri=world["manifest"])
    assert state == "success"
    assert_exactly_once(count_keys(kafka_broker.bootstrap, world["topic"]), [b"pending"])


def _task_states(run) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def answer_when_asked(dag_id: str, option: str, admin, tid: str) -> tuple[threading.Thread, dict]:
    """A person at the UI: waits (deadline-bounded) for the approval to be asked, notes the question and
    the transaction's state at that moment, then answers as the Approve / Reject buttons do.

    The answer is the Core API's write (``update_hitl_detail``: the response on the HITL row, then
    Airflow's ``handle_event_submit`` resumes the parked task) without its HTTP layer; dag.test() waits
    for exactly such an answer "from outside" and then runs the rest of the DAG itself.
    """
    from airflow.models.hitl import HITLDetail
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.trigger import handle_event_submit
    from airflow.triggers.base import TriggerEvent
    from airflow.utils import timezone
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState
    from sqlalchemy import select

    seen: dict = {}

    def answer() -> None:
        # dag.test() waits for this answer with no bound of its own: within pytest's 600 s, and a failed
        # reading of the transaction's state is recorded (the test's assertion names it), never a hang.
        deadline = time.monotonic() + 480
        while time.monotonic() < deadline:
            with create_session() as session:
                ti = session.scalar(select(TaskInstance).where(
                    TaskInstance.dag_id == dag_id, TaskInstance.task_id == "approve",
                    TaskInstance.state == TaskInstanceState.AWAITING_INPUT))
                detail = ti and session.scalar(select(HITLDetail).where(HITLDetail.ti_id == ti.id))
                if detail is not None:
                    try:
                        state = states(admin, [tid])[tid]
                    except Exception as err:  # reported by the caller's assertion on seen["state"]
                        state = f"not read: {err!r}"
                    seen["subject"], seen["state"] = detail.subject, state
                    detail.chosen_options, detail.params_input = [option], {}
                    detail.responded_at = timezone.utcnow()
                    handle_event_submit(TriggerEvent(detail.as_resume_event_payload()), task_instance=ti,
                                        session=session)
                    return
            time.sleep(0.1)  # polling interval of a deadline-bounded wait for the question

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    return thread, seen


@pytest.mark.parametrize("answer", ["Approve", "Reject"])
def test_unprotected_abort_waits_for_an_approval(manual_dag, world, capfd, answer):
    """Losing a PREPARED manifest's batch is asked first: nothing is sent to Kafka until a person
    approves; a rejection sends nothing at all."""
    ids = world["ids"]
    thread, seen = answer_when_asked(manual_dag.dag_id, answer, world["admin"], ids["pending"])
    run = manual_dag.test(run_conf={**BLANK_FORM, "action": "abort", "transactional_id": ids["pending"],
                                    "unprotected": True})
    thread.join(5)
    assert seen["subject"].startswith(f"Approve abort? It is an unprotected abort of {ids['pending']}")
    assert seen["state"] == "Ongoing"  # asked before anything was sent to Kafka
    out, err = capfd.readouterr()
    if answer == "Approve":
        assert _task_states(run) == {"approve": "success", "resolve": "success"}
        assert "UNPROTECTED ABORT" in out + err
        assert states(world["admin"], [ids["pending"]]) == {ids["pending"]: "Empty"}
    else:
        assert _task_states(run) == {"approve": "success", "resolve": "skipped"}
        assert states(world["admin"], [ids["pending"]]) == {ids["pending"]: "Ongoing"}


def test_requests_that_cannot_lose_data_skip_the_approval(manual_dag, world):
    pending = world["ids"]["pending"]
    run = manual_dag.test(run_conf={**BLANK_FORM, "action": "abort", "transactional_id": pending,
                                    "unprotected": True, "dry_run": True})
    assert _task_states(run) == {"approve": "skipped", "resolve": "success"}
    assert states(world["admin"], [world["ids"]["pending"]]) == {world["ids"]["pending"]: "Ongoing"}


def test_commit_by_producer_id_and_epoch(manual_dag, world):
    tid = world["ids"]["by_hand"]
    described = world["admin"].describe([tid])[tid]
    state, xcom = run_form(
        manual_dag,
        action="commit",
        transactional_id=tid,
        producer_id=described.producer_id,
        epoch=described.producer_epoch,
    )
    assert state == "success", xcom
    assert states(world["admin"], [tid]) == {tid: "CompleteCommit"}


def test_commit_from_manifest_commits_and_marks_it(kafka_broker, manual_dag, world):
    ids = world["ids"]
    world["admin"].abort([ids["orphan"]])  # clear the LSO so the consumer can see the committed batch
    state, xcom = run_form(manual_dag, action="commit-from-manifest", manifest_uri=world["manifest"])
    assert state == "success", xcom
    assert read_manifest(world["manifest"]).status is ManifestStatus.COMMITTED
    world["admin"].abort([ids["by_hand"]])
    assert_exactly_once(count_keys(kafka_broker.bootstrap, world["topic"]), [b"pending"])


def test_commit_without_epoch_fails_naming_the_form_fields_and_changes_nothing(manual_dag, world, capfd):
    """Before: the form's user read "commit needs --producer-id and --epoch", flags of a CLI they never ran.
    The log now starts with the request as submitted, then the rule in the form's words."""
    tid = world["ids"]["by_hand"]
    described = world["admin"].describe([tid])[tid]
    state, xcom = run_form(
        manual_dag, action="commit", transactional_id=tid, producer_id=described.producer_id
    )
    assert state == "failed"
    assert xcom is None
    out, err = capfd.readouterr()
    log = out + err
    assert (
        "commit needs 'Producer id' (producer_id) and 'Producer epoch' (epoch) "
        "(from the checkpoint manifest or `describe`)" in log
    )
    assert "--producer-id" not in log and "--epoch" not in log
    submitted = log.index("resolution request as submitted: {'action': 'commit'")
    assert submitted < log.index("commit needs")
    assert states(world["admin"], [tid]) == {tid: "Ongoing"}
