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

from airflow_provider_kafka_eos.kafka.manifest import ManifestStatus, find_manifests
from airflow_provider_kafka_eos.testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.dag, pytest.mark.spark, pytest.mark.broker]

REPO = pathlib.Path(__file__).resolve().parents[2]
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
    written = sum(count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted").values())

    # dag.test() re-creates the run for the same logical date (a new run id): the same checkpoint,
    # a duplicate of the first run's, skipped and named (a real clear: tests/dags/test_manual_runs.py).
    rerun = pipeline_dag.test(logical_date=second, run_conf=conf)
    assert _states(rerun) == {"preflight": "success", "submit": "skipped", "commit": "skipped"}
    assert sum(count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted").values()) == written
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)

    # Invariant 8: the connection's secret reached no log line, manifest or command line.
    captured = capfd.readouterr()
    assert SECRET not in captured.out + captured.err
    assert all(SECRET not in p.read_text() for p in (tmp_path / "manifests").rglob("*.json"))
