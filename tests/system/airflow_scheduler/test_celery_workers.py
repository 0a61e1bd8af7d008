"""The example DAGs on a distributed Airflow: CeleryExecutor, Redis, two workers, manifests on S3.

``kafka_eos_testing/celery_deployment.py`` runs Redis (Debian's redis-server), the control plane (api-server,
scheduler, dag-processor, triggerer) and two Celery workers, each with its own AIRFLOW_HOME,
working directory and TMPDIR: ``spark`` serves queue ``spark`` (the pipeline's submit), ``kafka``
serves queue ``kafka`` (the deployment's default queue: preflight, commit, the cleanup DAG). The
workers share nothing but Kafka (the embedded broker), Redis, the API server and the manifest
store on an S3-API server (moto, ``kafka_eos_testing/s3_server.py``). No worker has an AWS variable in its
environment: the store's credentials and endpoint come from an Airflow connection
(``manifest_store_conn_id``) kept in the metadata database, and reach the Spark driver in the
submit's private file. A read_committed consumer counts the keys at the end of each DAG.

Measured on the shared 2-core machine (load 7-15): 190-361 s, of which setup (Redis, db migrate,
four services, two workers) 81-127 s and the two DAGs 115-215 s (one spark-submit); the
deployment starts once per module.
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

from kafka_eos_testing import s3_server
from kafka_eos_testing.celery_deployment import CeleryDeployment
from kafka_eos_testing.embedded import unique_name
from kafka_eos_testing.transactions import produce_transaction
from kafka_eos_testing.verify import assert_exactly_once, count_keys

REPO = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "dags"))
from eos_sample_events import write_batch  # noqa: E402

pytestmark = [pytest.mark.airflow_services, pytest.mark.broker, pytest.mark.timeout(900),
              pytest.mark.provider_logic]

QUIET_PREFIX = unique_name("celery-quiet") + "-"  # the scheduled cleanup run's prefix: nothing lingers there
STORE_CONN_ID = "manifest_store_s3"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with s3_server.S3Server(log_path=tmp_path_factory.mktemp("s3") / "s3-server.log") as server:
        yield server


@pytest.fixture(scope="module")
def deployment(kafka_broker, s3, airflow_db_template, tmp_path_factory):
    bucket = unique_name("celery-store").lower().replace("_", "-")[:60]
    store = s3.create_bucket(bucket) + "/manifests"
    settings = {
        "AIRFLOW__OPERATORS__DEFAULT_QUEUE": "kafka",
        "KAFKA_EOS_PIPELINE_SUBMIT_QUEUE": "spark",
        "KAFKA_EOS_PIPELINE_COMMIT_QUEUE": "kafka",
        "KAFKA_EOS_PIPELINE_SCHEDULE": "none",
        "KAFKA_EOS_CLEANUP_PREFIXES": QUIET_PREFIX,
        "KAFKA_EOS_CLEANUP_POLL_SECONDS": "2",
    }
    root = tmp_path_factory.mktemp("celery")
    with CeleryDeployment(root, dags_folder=REPO / "dags", workers={"spark": "spark", "kafka": "kafka"},
                          settings=settings, db_template=airflow_db_template) as running:
        running.store = store
        running.add_connection(
            "kafka_eos_default", "kafka_eos",
            extra={"bootstrap.servers": kafka_broker.bootstrap, "manifest_base_uri": store,
                   "manifest_store_conn_id": STORE_CONN_ID},
        )
        running.add_connection(
            STORE_CONN_ID, "aws", login=s3_server.ACCESS_KEY, password=s3_server.SECRET_KEY,
            extra={"endpoint_url": s3.endpoint, "region_name": s3_server.REGION},
        )
        running.add_connection("spark_local", "spark", host="local[2]")
        yield running


def _manifests(s3, store: str, pipeline_id: str) -> list[dict]:
    bucket, prefix = store.removeprefix("s3://").split("/", 1)
    client = s3.client()
    listed = client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/{pipeline_id}/checkpoint-")
    return [json.loads(client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read())
            for o in listed.get("Contents", [])]


def _task_log(d: CeleryDeployment, worker: str, dag_id: str, run_id: str, task_id: str) -> str:
    return "\n".join(p.read_text() for p in d.task_log_files(worker, dag_id, run_id, task_id))


def test_submit_and_commit_on_different_workers_with_the_store_on_s3_then_cleanup(
    deployment, kafka_broker, s3
):
    d = deployment
    pipeline_id = unique_name("celery").replace("-", "_")
    topic = unique_name("celery-per-user")
    input_dir = d.worker_home("spark") / "input"  # the input lands where Spark runs
    expected = write_batch(input_dir, "celery-batch", users=40)
    d.unpause("eos_pipeline")
    conf = {"pipeline_id": pipeline_id, "topic": topic, "input_dir": str(input_dir), "batch": "celery-batch",
            "spark_partitions": 2}
    run_id = d.trigger("eos_pipeline", conf)
    run = d.wait_for_run("eos_pipeline", run_id, 600)
    tis = d.task_instances("eos_pipeline", run_id)
    assert run["state"] == "success", ({t: ti["state"] for t, ti in tis.items()}, d.log_tails())
    assert (tis["submit"]["queue"], tis["commit"]["queue"]) == ("spark", "kafka")
    # Each task ran in its own worker's home only: nothing on disk was shared between them.
    for task, worker, other in (("submit", "spark", "kafka"), ("commit", "kafka", "spark")):
        assert d.task_log_files(worker, "eos_pipeline", run_id, task), f"{task} has no log on worker {worker}"
        assert not d.task_log_files(other, "eos_pipeline", run_id, task), f"{task} also ran on worker {other}"
    commit_log = _task_log(d, "kafka", "eos_pipeline", run_id, "commit")
    assert f"credentials and endpoint from connection '{STORE_CONN_ID}'" in commit_log
    [manifest] = _manifests(s3, d.store, pipeline_id)
    assert manifest["status"] == "COMMITTED", manifest
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)

    # The cleanup DAG on the kafka worker (sensor deferred to the triggerer), reading the same S3
    # store through the same connection: an orphan beside the committed batch is aborted.
    prefix = unique_name("celery-orphan") + "-"
    produce_transaction(kafka_broker.bootstrap, f"{prefix}0-1", topic, [b"orphan"], commit=False,
                        transaction_timeout_ms=600_000)
    d.unpause("eos_cleanup")
    cleanup = d.trigger("eos_cleanup", {"prefixes": [prefix], "min_age_seconds": 0,
                                        "commit_pending_action": "commit", "dry_run": False})
    run = d.wait_for_run("eos_cleanup", cleanup, 300)
    tis = d.task_instances("eos_cleanup", cleanup)
    assert run["state"] == "success", ({t: ti["state"] for t, ti in tis.items()}, d.log_tails())
    assert {ti["queue"] for ti in tis.values()} == {"kafka"}
    abort_log = _task_log(d, "kafka", "eos_cleanup", cleanup, "abort_orphans")
    assert f"{prefix}0-1" in abort_log, abort_log[-3000:]
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)  # the orphan never shows

    # The store's secret is in no log and no file of any service or worker (the metadata DB holds it,
    # in its journal or write-ahead log too: the migrated template copied per deployment is in WAL mode).
    database = (".db", ".db-journal", ".db-wal", ".db-shm")
    leaked = [p for p in d.root.rglob("*") if p.is_file() and not p.name.endswith(database)
              and s3_server.SECRET_KEY.encode() in p.read_bytes()]
    assert not leaked, leaked
