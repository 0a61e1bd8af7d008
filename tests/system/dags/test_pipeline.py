"""dags/eos_pipeline.py end to end: dag.test() on SQLite, spark-submit in local mode, embedded broker.

Two runs (two checkpoints; the older interval runs second, as a backfill would), then a new run
for a logical date already written (a duplicate: skipped, nothing written): a read_committed
consumer sees every expected key of both batches exactly once.
"""

from __future__ import annotations

import json
import pathlib
import sys

import pendulum
import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, find_manifests
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.dag, pytest.mark.spark, pytest.mark.broker]

REPO = pathlib.Path(__file__).resolve().parents[3]
DAG_FILE = REPO / "dags" / "eos_pipeline.py"
sys.path.insert(0, str(REPO / "dags"))
from eos_sample_events import write_batch  # noqa: E402


@pytest.fixture
def pipeline_dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAG_FILE))
    assert bag.import_errors == {}
    return bag.get_dag("eos_pipeline")


@pytest.fixture
def connections(kafka_broker, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_EOS_DEFAULT",
        # A secret-shaped setting (harmless on PLAINTEXT) that must never show up anywhere.
        json.dumps(
            {"conn_type": "kafka_eos", "extra": kafka_broker.client_config(**{"ssl.key.password": SECRET})}
        ),
    )
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "spark", "host": "local[2,3]"}))


SECRET = "pipeline-secret-0815"


def asset_events(uri: str) -> list[dict]:
    """The extras of every Asset event recorded for ``uri``, oldest first (Airflow's own tables)."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(
            select(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetModel.uri == uri)
            .order_by(AssetEvent.id)
        ).all()
        return [dict(row.extra or {}) for row in rows]


def producing_tasks(uri: str) -> list[tuple[str, str]]:
    """The tasks Airflow lists as the Asset's producers (its task_outlet_asset_reference rows)."""
    from airflow.models.asset import AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        asset = session.scalars(select(AssetModel).where(AssetModel.uri == uri)).one()
        return [(ref.dag_id, ref.task_id) for ref in asset.producing_tasks]


def _states(run) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def test_pipeline_runs_checkpoints_exactly_once_and_a_cleared_rerun_changes_nothing(
    pipeline_dag, connections, kafka_broker, tmp_path, unique_name, capfd
):
    pipeline_id, topic = unique_name("activity").replace("-", "_"), unique_name("per-user")
    conf = {
        "pipeline_id": pipeline_id,
        "topic": topic,
        "input_dir": str(tmp_path / "input"),
        "manifest_base_uri": (tmp_path / "manifests").as_uri(),
        "spark_partitions": 2,
    }
    first, second = pendulum.datetime(2026, 3, 1, 10, tz="UTC"), pendulum.datetime(2026, 3, 1, 11, tz="UTC")
    expected = write_batch(tmp_path / "input", first.strftime("%Y%m%dT%H%M%S"), users=60)
    expected += write_batch(tmp_path / "input", second.strftime("%Y%m%dT%H%M%S"), users=80)

    # Newest first: the second run is a backfill of an older interval after a newer checkpoint
    # (its checkpoint id is lower than the committed one); both are written exactly once.
    for logical_date in (second, first):
        run = pipeline_dag.test(logical_date=logical_date, run_conf=conf)
        assert _states(run) == {"preflight": "success", "submit": "success", "commit": "success"}, _states(
            run
        )

    manifests = find_manifests(conf["manifest_base_uri"], pipeline_id)
    assert [m.status for _, m in manifests] == [ManifestStatus.COMMITTED] * 2
    assert manifests[0][1].checkpoint_id < manifests[1][1].checkpoint_id
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)
    # One Asset event per committed checkpoint, carrying its id and record count (data-aware scheduling).
    asset_uri = f"kafka://{kafka_broker.bootstrap.split(',')[0]}/{topic}"
    events = [(e["checkpoint_id"], e["records"]) for e in asset_events(asset_uri)]  # in commit order
    assert events == [
        (m.checkpoint_id, sum(c.record_count for c in m.committables)) for _, m in reversed(manifests)
    ]
    assert [r for _, r in events] == [80, 60]  # the newer interval ran first
    written = sum(count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted").values())

    # dag.test() re-creates the run for the same logical date (a new run id): the same checkpoint,
    # a duplicate of the first run's, skipped and named (a real clear: tests/system/dags/test_manual_runs.py).
    rerun = pipeline_dag.test(logical_date=second, run_conf=conf)
    assert _states(rerun) == {"preflight": "success", "submit": "skipped", "commit": "skipped"}
    assert sum(count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted").values()) == written
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)
    assert len(asset_events(asset_uri)) == 2  # the rerun committed nothing new: no downstream run again
    # The DAG declares its default topic's Asset on the commit task (the Asset page lists the producer);
    # these runs wrote another topic, so Airflow recorded no event for the declared one.
    declared = "kafka://broker:9092/user-activity-per-user"
    assert producing_tasks(declared) == [("eos_pipeline", "commit")]
    assert asset_events(declared) == []

    # Invariant 8: the connection's secret reached no log line, manifest or command line.
    captured = capfd.readouterr()
    assert SECRET not in captured.out + captured.err
    assert all(SECRET not in p.read_text() for p in (tmp_path / "manifests").rglob("*.json"))


@pytest.mark.provider_logic  # Airflow-side input rules; the first test proves the DAG on real Kafka
def test_manual_trigger_without_logical_date_reads_the_batch_of_its_run_after(
    pipeline_dag, connections, kafka_broker, tmp_path, unique_name
):
    """Airflow 3's default manual trigger (UI, CLI, REST) has no logical date: no ``ts_nodash``.

    Before: every such run failed rendering ``'ts_nodash' is undefined`` (and retried).
    """
    pipeline_id, topic = unique_name("manual").replace("-", "_"), unique_name("per-user")
    run_after = pendulum.datetime(2026, 3, 2, 9, 30, 15, tz="UTC")
    expected = write_batch(tmp_path / "input", "20260302T093015", users=40)
    conf = {
        "pipeline_id": pipeline_id,
        "topic": topic,
        "input_dir": str(tmp_path / "input"),
        "manifest_base_uri": (tmp_path / "manifests").as_uri(),
        "spark_partitions": 2,
    }

    run = pipeline_dag.test(logical_date=None, run_after=run_after, run_conf=conf)

    assert run.logical_date is None
    assert _states(run) == {"preflight": "success", "submit": "success", "commit": "success"}, _states(run)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)


@pytest.mark.provider_logic  # Airflow-side input rules; the first test proves the DAG on real Kafka
def test_a_date_without_events_skips_the_run_and_the_batch_param_picks_one(
    pipeline_dag, connections, kafka_broker, tmp_path, unique_name
):
    """The UI's default date names a batch folder that does not exist: the submit and commit tasks
    are skipped with the reason, nothing is prepared (tests/system/dags/test_empty_input.py has the words).

    Before: Spark failed on the missing path, three tries each; later, a green run that committed
    an empty checkpoint, with "nothing to write" only inside Spark's output. The ``batch`` param
    chooses the folder whatever the run's date.
    """
    pipeline_id, topic = unique_name("anydate").replace("-", "_"), unique_name("per-user")
    conf = {
        "pipeline_id": pipeline_id,
        "topic": topic,
        "input_dir": str(tmp_path / "input"),
        "manifest_base_uri": (tmp_path / "manifests").as_uri(),
        "spark_partitions": 2,
    }
    expected = write_batch(tmp_path / "input", "manual-batch", users=30)
    ui_default = pendulum.datetime(2026, 11, 23, 1, 2, 3, tz="UTC")

    empty = pipeline_dag.test(logical_date=ui_default, run_conf=conf)
    skipped = {"preflight": "success", "submit": "skipped", "commit": "skipped"}
    assert _states(empty) == skipped, _states(empty)
    chosen = pipeline_dag.test(
        logical_date=ui_default.add(minutes=1), run_conf={**conf, "batch": "manual-batch"}
    )

    all_success = {"preflight": "success", "submit": "success", "commit": "success"}
    assert _states(chosen) == all_success, _states(chosen)
    manifests = [m for _, m in find_manifests(conf["manifest_base_uri"], pipeline_id)]
    assert [bool(m.committables) for m in manifests] == [True]  # only the chosen batch has a checkpoint
    assert manifests[0].status is ManifestStatus.COMMITTED
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)


@pytest.mark.provider_logic  # Airflow-side input rules; the first test proves the DAG on real Kafka
def test_a_missing_input_dir_fails_the_submit_task_at_once_without_retries(
    pipeline_dag, connections, tmp_path, unique_name
):
    """A deterministic usage error: same on every try, so no retry may be spent on it (retries=2)."""
    conf = {
        "pipeline_id": unique_name("noinput").replace("-", "_"),
        "topic": unique_name("per-user"),
        "input_dir": str(tmp_path / "no-such-folder"),
        "manifest_base_uri": (tmp_path / "manifests").as_uri(),
    }

    run = pipeline_dag.test(logical_date=None, run_conf=conf)

    assert _states(run) == {"preflight": "success", "submit": "failed", "commit": "upstream_failed"}
    submit = next(ti for ti in run.get_task_instances() if ti.task_id == "submit")
    assert submit.try_number == 1  # failed at once: no retry was scheduled
    assert pipeline_dag.get_task("submit").retries == 2
