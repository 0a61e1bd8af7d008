"""Example: bring your own Spark runner. The job runs through ``@task.pyspark``; the commit task finds
its checkpoint by pipeline id and input identity alone (docs/user-guide/own-runner.md).

1. ``job``: the Spark provider's ``@task.pyspark`` gives the task a SparkSession (the Spark
   connection's master; ``local[2]`` here) and runs ``build_dataframe`` of the example pipeline on
   the ``batch`` param's events, then ``write_input_exactly_once``: the job claims the batch in the
   manifest store and prepares one checkpoint for it (transactions open, manifest PREPARED). Any
   runner works the same way: a spark-operator application, a Databricks or EMR job, a notebook;
   only the two names below travel.
2. ``commit``: ``KafkaCommitTransactionsOperator(pipeline_id=..., input_id=...)`` reads the batch's
   claim, commits the checkpoint it names and marks it COMMITTED. No XCom from the job.

Rerun the same batch (a cleared job, or a new run with the same ``batch``): the job writes nothing
(the claim names the checkpoint already prepared or committed) and the commit task commits it or
reports it committed again. Connections: ``kafka_eos_default`` (type ``kafka_eos``, with the
``manifest_base_uri``), ``spark_local`` (type ``spark``, host ``local[2]``). Manual trigger only.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG, Param, task

from airflow_provider_kafka_eos.operators.commit import KafkaCommitTransactionsOperator

PIPELINE_ID = os.environ.get("KAFKA_EOS_BYO_PIPELINE_ID", "user_activity_byo")
TOPIC = os.environ.get("KAFKA_EOS_BYO_TOPIC", "user-activity-byo")
KAFKA_EOS_CONN_ID = os.environ.get("KAFKA_EOS_PIPELINE_CONN_ID", "kafka_eos_default")
SPARK_CONN_ID = os.environ.get("KAFKA_EOS_PIPELINE_SPARK_CONN_ID", "spark_local")
INPUT_DIR = os.environ.get("KAFKA_EOS_PIPELINE_INPUT_DIR", "/tmp/eos-pipeline/input")  # noqa: S108
JOB_FILE = Path(__file__).resolve().with_name("eos_pipeline_job.py")


def _job_module() -> Any:
    """``eos_pipeline_job.py`` beside this file (the example pipeline's PySpark code)."""
    spec = importlib.util.spec_from_file_location("eos_pipeline_job_for_byo", JOB_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


with DAG(
    dag_id="eos_byo_runner",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params={
        "batch": Param("20260101T000000", type="string", minLength=1,
                       description="the input batch: its folder under input_dir, and the input identity"),
        "pipeline_id": Param(PIPELINE_ID, type="string"),
        "topic": Param(TOPIC, type="string"),
        "input_dir": Param(INPUT_DIR, type="string"),
        "manifest_base_uri": Param("", type="string", description="blank: the connection's store"),
        "reprocess": Param(False, type="boolean", description="write a committed batch again, on purpose"),
    },
    tags=["kafka-eos", "example"],
) as dag:

    @task.pyspark(task_id="job", conn_id=SPARK_CONN_ID, retries=1)
    def job(spark: Any = None, sc: Any = None, **context: Any) -> dict[str, Any]:
        """The user's Spark job: build the DataFrame, then claim the batch and prepare its checkpoint."""
        from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
        from airflow_provider_kafka_eos.spark.own_runner import write_input_exactly_once
        from airflow_provider_kafka_eos.tasks.dag_run import run_identity, run_state_probe

        params = context["params"]
        hook = KafkaEosHook(kafka_eos_conn_id=KAFKA_EOS_CONN_ID)
        # On an Airflow worker the connection has the Kafka config and the store's credentials; a job
        # elsewhere reads them from a mounted file (handoff.load_client_config / load_store_access).
        store = hook.manifest_store(params["manifest_base_uri"] or None)
        batch = {"batch": params["batch"], "input_dir": params["input_dir"]}
        df = _job_module().build_dataframe(spark, batch)
        result = write_input_exactly_once(
            df, pipeline_id=params["pipeline_id"], input_id=params["batch"], topic=params["topic"],
            kafka_config=hook.client_config(), manifest_base_uri=store.base_uri, store_access=store.access,
            run=run_identity(context), run_is_active=run_state_probe(context),
            reprocess=bool(params["reprocess"]),
        )
        return result.to_dict()  # for the log and the UI only: the commit task does not read it

    commit = KafkaCommitTransactionsOperator(
        task_id="commit",
        kafka_eos_conn_id=KAFKA_EOS_CONN_ID,
        pipeline_id="{{ params.pipeline_id }}",
        input_id="{{ params.batch }}",
        manifest_base_uri="{{ params.manifest_base_uri or '' }}",
        retries=3,
        retry_delay=pendulum.duration(seconds=30),
    )

    job() >> commit
