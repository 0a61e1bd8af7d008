"""dags/eos_byo_runner.py end to end (issue #37, "bring your own Spark runner"): dag.test() on SQLite,
the job in ``@task.pyspark`` (a local SparkSession in this process), the embedded broker.

The commit task gets nothing from the job: it finds the checkpoint by pipeline id and input id in
the manifest store. A second run over the same batch writes nothing and commits nothing new.
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, find_manifests
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.dag, pytest.mark.spark, pytest.mark.broker]

REPO = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "dags"))
from eos_sample_events import write_batch  # noqa: E402


@pytest.fixture
def byo_dag(airflow_db, kafka_broker, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_EOS_DEFAULT", json.dumps(
        {"conn_type": "kafka_eos", "extra": kafka_broker.client_config()}))
    # The connection's extra is the session's conf (@task.pyspark): the Python workers run this one.
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps(
        {"conn_type": "spark", "host": "local[2]",
         "extra": {"spark.pyspark.python": sys.executable, "spark.ui.enabled": "false"}}))
    bag = DagBag(dag_folder=str(REPO / "dags" / "eos_byo_runner.py"))
    assert bag.import_errors == {}
    yield bag.get_dag("eos_byo_runner")
    _stop_spark_gateway()


def _stop_spark_gateway() -> None:
    """The task stops its session; its JVM lives on until the gateway is shut."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is not None:
        gateway.shutdown()
        SparkContext._gateway = SparkContext._jvm = None


def _states(run) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def test_a_job_of_any_runner_is_committed_by_pipeline_and_input_and_a_rerun_writes_nothing(
    byo_dag, kafka_broker, tmp_path, unique_name
):
    pipeline_id, topic = unique_name("byo").replace("-", "_"), unique_name("byo-out")
    store = (tmp_path / "manifests").as_uri()
    expected = write_batch(tmp_path / "input", "b1", users=40)
    conf = {"batch": "b1", "pipeline_id": pipeline_id, "topic": topic, "input_dir": str(tmp_path / "input"),
            "manifest_base_uri": store}

    run = byo_dag.test(run_conf=conf)
    assert _states(run) == {"job": "success", "commit": "success"}, _states(run)
    [(_, manifest)] = find_manifests(store, pipeline_id)
    assert manifest.status is ManifestStatus.COMMITTED and manifest.input.id == "b1"
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)
    written = sum(count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted").values())

    # Another run over the same batch: the job finds the claim (a duplicate, nothing produced) and
    # the commit task finds the same, already committed checkpoint.
    again = byo_dag.test(run_conf=conf)
    assert _states(again) == {"job": "success", "commit": "success"}, _states(again)
    job = next(ti for ti in again.get_task_instances() if ti.task_id == "job")
    assert job.xcom_pull(task_ids="job")["written"] is False
    commit = next(ti for ti in again.get_task_instances() if ti.task_id == "commit")
    assert commit.xcom_pull(task_ids="commit")["status"] == "already_committed"
    assert [m.checkpoint_id for _, m in find_manifests(store, pipeline_id)] == [manifest.checkpoint_id]
    assert sum(count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted").values()) == written
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)
