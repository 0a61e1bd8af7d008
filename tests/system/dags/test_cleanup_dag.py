"""dags/eos_cleanup.py end to end with dag.test() on SQLite against the embedded broker."""

from __future__ import annotations

import pathlib

import pytest
from test_duplicate_input import _sync_and_unpause, downstream_partitions, partition_events
from txn_helpers import (
    connect_admin,
    produce_in_transaction,
    set_kafka_eos_connection,
    states,
    write_prepared_manifest,
)

from airflow_provider_kafka_eos.assets.lineage import kafka_asset_uri
from airflow_provider_kafka_eos.kafka.checkpoints.identity import InputRecord
from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    ManifestStatus,
    read_manifest,
    write_manifest,
)
from kafka_eos_testing.embedded import unique_name
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.dag, pytest.mark.broker]

DAG_FILE = pathlib.Path(__file__).resolve().parents[3] / "dags" / "eos_cleanup.py"


@pytest.fixture
def cleanup_dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAG_FILE))
    assert bag.import_errors == {}
    return bag.get_dag("eos_cleanup")


@pytest.fixture
def stuck_topic(kafka_broker, monkeypatch, tmp_path):
    """A topic whose read_committed consumers are stuck behind an orphan, with a prepared batch behind it.

    The connection's extra names the manifest store, the default of the DAG's sensor and abort task.
    """
    set_kafka_eos_connection(monkeypatch, kafka_broker.bootstrap, manifest_base_uri=tmp_path.as_uri())
    prefix, topic = unique_name("clean") + "-", unique_name("topic")
    orphan, pending = f"{prefix}0-7", f"{prefix}1-7"
    produce_in_transaction(kafka_broker.bootstrap, orphan, topic, ["o1", "o2"], commit=False)
    produce_in_transaction(kafka_broker.bootstrap, pending, topic, ["p1", "p2", "p3"], commit=False)
    produce_in_transaction(kafka_broker.bootstrap, unique_name("steady"), topic, ["c1"], commit=True)
    base = tmp_path.as_uri()
    with connect_admin(kafka_broker.bootstrap) as admin:
        uri = write_prepared_manifest(admin, base, "orders", topic, [pending], checkpoint_id=7, prefix=prefix)
        manifest = read_manifest(uri)
        manifest.input = InputRecord("batch-7")  # the batch the report names
        write_manifest(uri, manifest)
        yield {
            "prefix": prefix,
            "topic": topic,
            "orphan": orphan,
            "pending": pending,
            "base": base,
            "manifest": uri,
            "admin": admin,
        }
        leftovers = [t for t, s in states(admin, [orphan, pending]).items() if s == "Ongoing"]
        admin.abort(leftovers)  # the broker is shared: leave nothing open behind


def task_states(dag_run) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}


def test_cleanup_commits_the_prepared_batch_then_aborts_the_orphan_and_unblocks_consumers(
    kafka_broker, cleanup_dag, stuck_topic
):
    """Under the defaults (the store comes from the connection): commit first, then abort, then count."""
    assert count_keys(kafka_broker.bootstrap, stuck_topic["topic"]) == {}  # stuck at the LSO

    run = cleanup_dag.test(
        run_conf={
            "prefixes": [stuck_topic["prefix"]],
            "min_age_seconds": 0,
            "commit_pending_action": "commit",
        }
    )

    assert str(run.state) == "success", task_states(run)
    assert task_states(run) == {
        "find_lingering": "success",
        "commit_pending": "success",
        "abort_orphans": "success",
        "summary": "success",
    }
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    assert tis["commit_pending"].end_date <= tis["abort_orphans"].start_date  # in sequence
    assert states(stuck_topic["admin"], [stuck_topic["orphan"], stuck_topic["pending"]]) == {
        stuck_topic["orphan"]: "Empty",  # fenced: aborted, new epoch, nothing open
        stuck_topic["pending"]: "CompleteCommit",
    }
    assert read_manifest(stuck_topic["manifest"]).status is ManifestStatus.COMMITTED
    summary = tis["summary"].xcom_pull(task_ids="summary")
    assert summary["committed_inputs"] == ["batch-7"]  # the report names batches, not only checkpoints
    assert_exactly_once(
        count_keys(kafka_broker.bootstrap, stuck_topic["topic"]), [b"p1", b"p2", b"p3", b"c1"]
    )
    # No DAG declares this topic's Asset: the event goes through the alias, keyless (Airflow's design).
    assert partition_events(kafka_asset_uri(kafka_broker.bootstrap, stuck_topic["topic"])) == [(None, 7)]


def test_the_checkpoint_the_cleanup_commits_gets_its_partitioned_event_once_and_downstream_runs_for_it(
    kafka_broker, cleanup_dag, stuck_topic, monkeypatch
):
    """A failed run's checkpoint committed by the cleanup is announced by the cleanup (the production
    soak of 2026-11-28 missed such an event): keyed by its batch on the pipeline's declared topic Asset,
    eos_downstream queued for that batch. (A try that finds it COMMITTED announces nothing:
    tests/assets/test_cleanup_announcements.py.)"""
    monkeypatch.setenv("KAFKA_EOS_PIPELINE_TOPIC", stuck_topic["topic"])
    monkeypatch.setenv("KAFKA_EOS_PIPELINE_BOOTSTRAP_SERVERS", kafka_broker.bootstrap)
    _sync_and_unpause("eos_downstream")  # eos_pipeline declares the topic's Asset, eos_downstream waits on it
    uri = kafka_asset_uri(kafka_broker.bootstrap, stuck_topic["topic"])
    conf = {"prefixes": [stuck_topic["prefix"]], "min_age_seconds": 0, "commit_pending_action": "commit"}

    first = cleanup_dag.test(run_conf=conf)

    assert str(first.state) == "success", task_states(first)
    assert read_manifest(stuck_topic["manifest"]).status is ManifestStatus.COMMITTED
    assert partition_events(uri) == [("batch-7", 7)]
    assert downstream_partitions() == ["batch-7"]
    assert_exactly_once(
        count_keys(kafka_broker.bootstrap, stuck_topic["topic"]), [b"p1", b"p2", b"p3", b"c1"]
    )


def test_alert_mode_fails_loudly_and_never_aborts_the_prepared_batch(kafka_broker, cleanup_dag, stuck_topic):
    run = cleanup_dag.test(
        run_conf={"prefixes": [stuck_topic["prefix"]], "min_age_seconds": 0, "commit_pending_action": "alert"}
    )

    assert str(run.state) == "failed"
    got = task_states(run)
    assert (got["commit_pending"], got["abort_orphans"], got["summary"]) == ("success", "success", "failed")
    assert states(stuck_topic["admin"], [stuck_topic["orphan"], stuck_topic["pending"]]) == {
        stuck_topic["orphan"]: "Empty",
        stuck_topic["pending"]: "Ongoing",  # still committable: a human decides
    }
    assert read_manifest(stuck_topic["manifest"]).status is ManifestStatus.PREPARED
    assert_committed_exactly_once(kafka_broker, stuck_topic)


@pytest.mark.provider_logic  # the DAG's refusal: it changes nothing on any broker
def test_unreadable_store_refuses_and_aborts_nothing(kafka_broker, cleanup_dag, stuck_topic, tmp_path):
    missing = (tmp_path / "no-such-store").as_uri()
    run = cleanup_dag.test(
        run_conf={
            "prefixes": [stuck_topic["prefix"]],
            "manifest_base_uri": missing,
            "min_age_seconds": 0,
            "commit_pending_action": "commit",
        }
    )
    assert str(run.state) == "failed"
    assert task_states(run)["find_lingering"] == "failed"
    assert task_states(run)["abort_orphans"] in ("upstream_failed", "skipped")
    assert states(stuck_topic["admin"], [stuck_topic["orphan"], stuck_topic["pending"]]) == {
        stuck_topic["orphan"]: "Ongoing",
        stuck_topic["pending"]: "Ongoing",
    }
    assert_committed_exactly_once(kafka_broker, stuck_topic)


@pytest.mark.provider_logic  # the DAG's dry run: it changes nothing on any broker
def test_dry_run_says_would_and_changes_nothing(kafka_broker, cleanup_dag, stuck_topic, capfd):
    run = cleanup_dag.test(
        run_conf={"prefixes": [stuck_topic["prefix"]], "min_age_seconds": 0, "dry_run": True}
    )
    assert str(run.state) == "success", task_states(run)
    out, err = capfd.readouterr()
    assert "dry run: would abort 1 transaction(s); would commit 1 checkpoint(s)" in out + err
    assert states(stuck_topic["admin"], [stuck_topic["orphan"], stuck_topic["pending"]]) == {
        stuck_topic["orphan"]: "Ongoing",
        stuck_topic["pending"]: "Ongoing",
    }
    assert read_manifest(stuck_topic["manifest"]).status is ManifestStatus.PREPARED


def assert_committed_exactly_once(kafka_broker, stuck_topic) -> None:
    """Abort what is left open but the prepared batch, commit it, and count every key once."""
    admin = stuck_topic["admin"]
    if states(admin, [stuck_topic["orphan"]])[stuck_topic["orphan"]] == "Ongoing":
        admin.abort([stuck_topic["orphan"]])
    assert commit_checkpoint(admin, stuck_topic["manifest"], committed_by="test").status == "committed"
    assert_exactly_once(
        count_keys(kafka_broker.bootstrap, stuck_topic["topic"]), [b"p1", b"p2", b"p3", b"c1"]
    )


def test_the_shipped_sensor_defers_and_a_manual_run_is_not_queued_behind_a_waiting_one(cleanup_dag):
    """Before: reschedule mode (a worker slot per poke) and max_active_runs=1, so a "Trigger w/ config"
    run waited up to 10 minutes behind the scheduled run's sensor. The behaviour itself runs through a
    real scheduler and triggerer in tests/system/airflow_scheduler/."""
    sensor = cleanup_dag.get_task("find_lingering")
    assert sensor.deferrable is True
    assert sensor.mode == "poke"  # deferrable: one poke in the worker, the triggerer does the waiting
    assert cleanup_dag.max_active_runs >= 2
