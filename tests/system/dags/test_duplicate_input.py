"""The same batch triggered twice by hand is written once; a reprocess writes it again, on record.

The example pipeline DAG as shipped (dag.test() on SQLite, spark-submit in local mode, the
embedded broker). Two manual runs of batch B1, as the UI's trigger form makes them: each gets a
new logical date ("now"), so each gets its own checkpoint id; only the input identity (the batch)
says they read the same data. Before input identities, both runs were green and a
read_committed consumer counted every key twice. The real-scheduler version (the trigger form's
call, the REST API without a logical date and the CLI; two runs at once) is in
tests/system/airflow_scheduler/test_real_scheduler.py.
"""

from __future__ import annotations

import pathlib
import sys
from datetime import datetime, timedelta, timezone

import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, find_manifests
from airflow_provider_kafka_eos.operators.submit import XCOM_CHECKPOINT_KEY
from kafka_eos_testing.verify import assert_exactly_once, count_keys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "dags"))
from eos_sample_events import write_batch
from test_manual_runs import _clear_and_rerun
from test_pipeline import DAG_FILE, _states, asset_events, connections  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.dag, pytest.mark.spark, pytest.mark.broker, pytest.mark.provider_logic]


@pytest.fixture
def declared_dags(airflow_db, kafka_broker, unique_name, monkeypatch):
    """The example pipeline and eos_downstream parsed for a fresh topic, as a deployment sets them up:
    the commit task declares the topic's Asset (its events get partition keys) and eos_downstream is
    scheduled on it (dag.test() syncs every DAG of the folder, with this environment)."""
    from airflow.dag_processing.dagbag import DagBag

    topic = unique_name("per-user")
    monkeypatch.setenv("KAFKA_EOS_PIPELINE_TOPIC", topic)
    monkeypatch.setenv("KAFKA_EOS_PIPELINE_BOOTSTRAP_SERVERS", kafka_broker.bootstrap)
    bag = DagBag(dag_folder=str(DAG_FILE))
    assert bag.import_errors == {}
    _sync_and_unpause("eos_downstream")
    return bag.get_dag("eos_pipeline"), topic


def _sync_and_unpause(dag_id: str) -> None:
    """The DAG folder as this environment parses it, in the database, ``dag_id`` unpaused (Airflow queues
    runs only for unpaused DAGs; a deployment's DAG processor and a user's toggle do the same)."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import update

    DagBundlesManager().sync_bundles_to_db()
    folder = DAG_FILE.parent
    bag = BundleDagBag(dag_folder=folder, bundle_path=folder, bundle_name="dags-folder")
    sync_bag_to_db(bag, "dags-folder", None)
    with create_session() as session:
        unpaused = session.execute(update(DagModel).where(DagModel.dag_id == dag_id).values(is_paused=False))
        assert unpaused.rowcount == 1


def partition_events(uri: str) -> list[tuple[str | None, int | None]]:
    """(partition_key, checkpoint_id) of every Asset event for ``uri``, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(select(AssetEvent).join(AssetModel, AssetEvent.asset_id == AssetModel.id)
                               .where(AssetModel.uri == uri).order_by(AssetEvent.id)).all()
        return [(row.partition_key, dict(row.extra or {}).get("checkpoint_id")) for row in rows]


def downstream_partitions() -> list[str]:
    """The partition keys Airflow queued eos_downstream runs for (one row per run the scheduler makes)."""
    from airflow.models.asset import AssetPartitionDagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return list(session.scalars(select(AssetPartitionDagRun.partition_key)
                                    .where(AssetPartitionDagRun.target_dag_id == "eos_downstream")
                                    .order_by(AssetPartitionDagRun.id)))


def forget_events(uri: str) -> None:
    """Airflow's tables as if the commit's try had died before Airflow recorded its event."""
    from airflow.models.asset import AssetEvent, AssetModel, AssetPartitionDagRun
    from airflow.utils.session import create_session
    from sqlalchemy import delete, select

    with create_session() as session:
        asset_id = session.scalar(select(AssetModel.id).where(AssetModel.uri == uri))
        session.execute(delete(AssetEvent).where(AssetEvent.asset_id == asset_id))
        session.execute(delete(AssetPartitionDagRun)
                        .where(AssetPartitionDagRun.target_dag_id == "eos_downstream"))


def _xcom(run, task_id="submit"):
    ti = next(t for t in run.get_task_instances() if t.task_id == task_id)
    return ti.xcom_pull(task_ids=task_id, key=XCOM_CHECKPOINT_KEY)


def test_a_batch_triggered_twice_is_written_once_and_a_reprocess_writes_it_again_on_record(
    declared_dags, connections, kafka_broker, tmp_path, unique_name, capfd  # noqa: F811
):
    dag, topic = declared_dags
    uri = f"kafka://{kafka_broker.bootstrap.split(',')[0]}/{topic}"
    conf = {
        "pipeline_id": unique_name("dupe").replace("-", "_"),
        "topic": topic,
        "input_dir": str(tmp_path / "input"),
        "manifest_base_uri": (tmp_path / "manifests").as_uri(),
        "spark_partitions": 2,
        "batch": "20260301T100000",
    }
    expected = write_batch(conf["input_dir"], conf["batch"], users=30)
    first_at = datetime(2026, 3, 1, 10, 5, tzinfo=timezone.utc)

    first = dag.test(logical_date=first_at, run_conf=conf)
    first_id, first_states = first.run_id, _states(first)
    assert first_states == {"preflight": "success", "submit": "success", "commit": "success"}
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)

    # The trigger form again a minute later: a new logical date, the same batch.
    second = dag.test(logical_date=first_at + timedelta(minutes=1), run_conf=conf)
    assert _states(second) == {"preflight": "success", "submit": "skipped", "commit": "skipped"}
    result = _xcom(second)
    assert result["outcome"] == "duplicate_input" and result["prepared_by"]["run_id"] == first_id
    assert f"input '20260301T100000' was already written by run '{first_id}'" in result["message"]
    assert "committed at" in result["message"] and "nothing written" in result["message"]
    assert f"was already written by run '{first_id}'" in capfd.readouterr().out  # the task log says it
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)
    [manifest] = [m for _, m in find_manifests(conf["manifest_base_uri"], conf["pipeline_id"])]
    assert manifest.input.id == conf["batch"] and manifest.input.reprocess_of is None
    # One event, keyed by the batch (Airflow >= 3.2): eos_downstream is queued once for it.
    assert partition_events(uri) == [(conf["batch"], manifest.checkpoint_id)]  # the duplicate: no 2nd event
    assert downstream_partitions() == [conf["batch"]]

    # The commit's try died before Airflow recorded its event; the run is cleared: the commit task finds
    # the manifest COMMITTED and no event for it, and emits the missing one. (A clear when the event
    # exists emits none: tests/system/dags/test_manual_runs.py.)
    forget_events(uri)
    _clear_and_rerun(dag, first_id)
    assert partition_events(uri) == [(conf["batch"], manifest.checkpoint_id)]
    assert downstream_partitions() == [conf["batch"]]
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)

    # Committed outside its commit task (the cleanup DAG after the run failed: the soak of 2026-11-28
    # found it), so no event: the batch triggered again writes nothing, and its commit task runs to
    # announce the checkpoint, once; a further trigger is skipped as before.
    forget_events(uri)
    announcing = dag.test(logical_date=first_at + timedelta(seconds=90), run_conf=conf)
    assert _states(announcing) == {"preflight": "success", "submit": "success", "commit": "success"}
    assert _xcom(announcing)["outcome"] == "duplicate_input"  # nothing written by this run
    logged = capfd.readouterr().out
    assert "Airflow holds no Asset event for that checkpoint: the commit task announces it" in logged
    assert partition_events(uri) == [(conf["batch"], manifest.checkpoint_id)]
    assert downstream_partitions() == [conf["batch"]]
    again = dag.test(logical_date=first_at + timedelta(seconds=100), run_conf=conf)
    assert _states(again) == {"preflight": "success", "submit": "skipped", "commit": "skipped"}
    assert partition_events(uri) == [(conf["batch"], manifest.checkpoint_id)]
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)

    # A deliberate reprocess (the corrected batch): written again, and the manifest says so.
    third = dag.test(logical_date=first_at + timedelta(minutes=2), run_conf={**conf, "reprocess": True})
    assert _states(third) == {"preflight": "success", "submit": "success", "commit": "success"}
    manifests = [m for _, m in find_manifests(conf["manifest_base_uri"], conf["pipeline_id"])]
    assert [(m.status, m.input.id, m.input.reprocess_of) for m in manifests] == [
        (ManifestStatus.COMMITTED, conf["batch"], None),
        (ManifestStatus.COMMITTED, conf["batch"], manifest.checkpoint_id),
    ]
    counts = count_keys(kafka_broker.bootstrap, topic)
    assert counts == {key.encode(): 2 for key in expected}  # each key once per write, asked for twice
    # Its own event, under the same key: the batch became visible again (eos_downstream runs again).
    assert partition_events(uri) == [(conf["batch"], m.checkpoint_id) for m in manifests]

    # A run that ended with its checkpoint still PREPARED (its commit task never ran: marked success
    # here, a run failed under faults in life): the batch triggered again commits it, as eos_cleanup
    # would, and announces it, once.
    before = partition_events(uri)
    # (reprocess named: dag.test() keeps the last run's param values for a conf that leaves one out)
    owed_conf = {**conf, "batch": "20260301T110000", "reprocess": False}
    owed_keys = write_batch(owed_conf["input_dir"], owed_conf["batch"], users=20)
    unfinished = dag.test(logical_date=first_at + timedelta(minutes=3), run_conf=owed_conf,
                          mark_success_pattern="^commit$")
    assert _states(unfinished) == {"preflight": "success", "submit": "success", "commit": "success"}
    [owed] = [m for _, m in find_manifests(conf["manifest_base_uri"], conf["pipeline_id"])
              if m.input.id == owed_conf["batch"]]
    assert owed.status is ManifestStatus.PREPARED
    finishing = dag.test(logical_date=first_at + timedelta(minutes=4), run_conf=owed_conf)
    assert _states(finishing) == {"preflight": "success", "submit": "success", "commit": "success"}
    assert "that run ended with it still PREPARED: the commit task commits it" in capfd.readouterr().out
    assert partition_events(uri) == [*before, (owed_conf["batch"], owed.checkpoint_id)]
    counts = count_keys(kafka_broker.bootstrap, topic)
    assert counts == {**{key.encode(): 2 for key in expected}, **{key.encode(): 1 for key in owed_keys}}
    again = dag.test(logical_date=first_at + timedelta(minutes=5), run_conf=owed_conf)
    assert _states(again) == {"preflight": "success", "submit": "skipped", "commit": "skipped"}
    assert len(partition_events(uri)) == len(before) + 1
