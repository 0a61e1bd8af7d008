"""dags/eos_byo_runner.py end to end (issue #37, "bring your own Spark runner"): dag.test() on SQLite,
the job in ``@task.pyspark`` (a local SparkSession in this process), the embedded broker.

The commit task gets nothing from the job: it finds the checkpoint by pipeline id and input id in
the manifest store. A second run over the same batch writes nothing and commits nothing new. The
store is S3 (the moto server of tests/support/s3_fixtures.py) reached only through Airflow
connections, as in production: no ``AWS_*`` variable exists, both tasks use the ``aws`` connection
the ``kafka_eos`` one names (the input's claim is a conditional put there).
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, find_manifests
from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import StoreAccess
from kafka_eos_testing import s3_server as s3
from kafka_eos_testing.embedded import unique_name as new_name
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.dag, pytest.mark.spark, pytest.mark.broker]

REPO = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "dags"))
from eos_sample_events import write_batch  # noqa: E402


@pytest.fixture
def s3_store(s3_server, monkeypatch) -> tuple[str, StoreAccess]:
    """A fresh bucket whose only way in is the ``aws`` connection (and the test's own access)."""
    import s3fs

    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    if (pathlib.Path.home() / ".aws").exists():
        pytest.skip("~/.aws holds credentials the standard chain would find: the test needs none")
    s3fs.S3FileSystem.clear_instance_cache()
    base = s3_server.create_bucket(new_name("eos-byo").lower().replace("_", "-")[:60]) + "/manifests"
    monkeypatch.setenv("AIRFLOW_CONN_BYO_STORE", json.dumps({
        "conn_type": "aws", "login": s3.ACCESS_KEY, "password": s3.SECRET_KEY,
        "extra": {"endpoint_url": s3_server.endpoint, "region_name": s3.REGION}}))
    options = {"key": s3.ACCESS_KEY, "secret": s3.SECRET_KEY, "endpoint_url": s3_server.endpoint,
               "client_kwargs": {"region_name": s3.REGION}}
    return base, StoreAccess(options)


@pytest.fixture
def byo_dag(airflow_db, kafka_broker, s3_store, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_EOS_DEFAULT", json.dumps(
        {"conn_type": "kafka_eos", "extra": {**kafka_broker.client_config(), "manifest_base_uri": s3_store[0],
                                             "manifest_store_conn_id": "byo_store"}}))
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
    byo_dag, kafka_broker, s3_store, tmp_path, unique_name
):
    pipeline_id, topic = unique_name("byo").replace("-", "_"), unique_name("byo-out")
    store, access = s3_store
    expected = write_batch(tmp_path / "input", "b1", users=40)
    # manifest_base_uri "": the connection's store, as both tasks read it
    conf = {"batch": "b1", "pipeline_id": pipeline_id, "topic": topic, "input_dir": str(tmp_path / "input"),
            "manifest_base_uri": ""}

    run = byo_dag.test(run_conf=conf)
    assert _states(run) == {"job": "success", "commit": "success"}, _states(run)
    [(_, manifest)] = find_manifests(store, pipeline_id, access=access)
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
    manifests = find_manifests(store, pipeline_id, access=access)
    assert [m.checkpoint_id for _, m in manifests] == [manifest.checkpoint_id]
    assert sum(count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted").values()) == written
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)
