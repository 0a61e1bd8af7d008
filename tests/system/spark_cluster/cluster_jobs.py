"""Helpers of the cluster tests: submit the keys job (tests/system/faults/keys_app.py) to the cluster,
by hand or through ``SparkEosSubmitOperator`` (one try of the submit task, no scheduler)."""

from __future__ import annotations

import json
import pathlib
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

from kafka_eos_testing.spark import job_arguments, spark_submit_job

KEYS_APP = pathlib.Path(__file__).resolve().parents[1] / "faults" / "keys_app.py"


def _keys(tag, n):
    return [f"{tag}-{i}" for i in range(n)]


def submit(cluster, broker, tmp_path, prefix, topic, checkpoint, *, count=300, partitions=3, conf=None,
           env=None, application_file=None):
    params = {"tag": prefix, "count": count, "partitions": partitions}
    arguments = job_arguments(
        prefix=prefix, topic=topic, checkpoint=checkpoint, manifest_base=tmp_path / "m",
        application=f"{KEYS_APP}:build_dataframe", params=params,
    )  # fmt: skip
    return spark_submit_job(
        arguments,
        client_config=broker.client_config(),
        work_dir=tmp_path,
        master=cluster.master_url,
        conf={**cluster.submit_conf(), **(conf or {})},
        env=env,
        application_file=application_file,
    )


def _tail(result):
    return result.stdout[-2000:] + result.stderr[-4000:]


def operator_connections(cluster, broker, monkeypatch, unique_name) -> tuple[str, str]:
    """A Spark connection to the cluster's master in client deploy mode and a kafka_eos connection to
    the broker, set as ``AIRFLOW_CONN_`` variables (a child process inherits them): their ids."""
    host, port = cluster.master_url.removeprefix("spark://").rsplit(":", 1)
    spark_conn = unique_name("spark").replace("-", "_")
    kafka_conn = unique_name("kafka_eos").replace("-", "_")
    spark = {"conn_type": "spark", "host": f"spark://{host}", "port": int(port),
             "extra": {"deploy-mode": "client"}}
    monkeypatch.setenv(f"AIRFLOW_CONN_{spark_conn.upper()}", json.dumps(spark))
    monkeypatch.setenv(f"AIRFLOW_CONN_{kafka_conn.upper()}", json.dumps(
        {"conn_type": "kafka_eos", "extra": broker.client_config()}
    ))  # fmt: skip
    return spark_conn, kafka_conn


def operator_arguments(cluster, *, spark_conn, kafka_conn, prefix, topic, manifest_base, count,
                       partitions=2, checkpoint_id=5, conf=None) -> dict[str, Any]:
    """``SparkEosSubmitOperator``'s arguments for the keys job on the cluster, executors on its
    provider-less Python (plain values: a child process can be given them)."""
    conf = {**{k: v for k, v in cluster.submit_conf().items() if k != "spark.pyspark.python"}, **(conf or {})}
    return {
        "task_id": "submit",
        "pipeline_id": prefix,
        "topic": topic,
        "manifest_base_uri": str(manifest_base),
        "application_callable": f"{KEYS_APP}:build_dataframe",
        "application_params": {"tag": prefix, "count": count, "partitions": partitions},
        "kafka_eos_conn_id": kafka_conn,
        "conn_id": spark_conn,
        "checkpoint_id": checkpoint_id,
        "executor_python": cluster.executor_python,
        "conf": conf,
    }


def task_context(prefix, try_number, task_state_store=None) -> dict[str, Any]:
    """What Airflow hands a try of the submit task (no scheduler here): its run, the try, and
    Airflow 3.3's task state store when one is given."""
    run = SimpleNamespace(dag_id="cluster_pipeline", run_id=f"manual__{prefix}", logical_date=None,
                          run_after=datetime(2026, 3, 1, tzinfo=timezone.utc))
    ti = SimpleNamespace(try_number=try_number, xcom_push=lambda *args, **kwargs: None)
    context: dict[str, Any] = {"dag_run": run, "ti": ti}
    if task_state_store is not None:
        context["task_state_store"] = task_state_store
    return context


def run_submit_try(arguments: dict[str, Any], prefix: str, try_number: int, state_file: str) -> str:
    """One try of the submit task with a file-backed task state store: the body of a child process
    a test can SIGKILL, as the OOM killer kills a task's process."""
    from task_state_double import FileTaskStateStore

    from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator

    operator = SparkEosSubmitOperator(**arguments)
    return operator.execute(task_context(prefix, try_number, FileTaskStateStore(state_file)))
