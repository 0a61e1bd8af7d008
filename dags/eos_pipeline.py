"""Example exactly-once pipeline: JSON events -> PySpark enrich + aggregate -> Kafka, exactly once.

Copy and adapt. Each run is one checkpoint of the pipeline (two-phase commit, Airflow is the
transaction manager):

1. ``preflight``: the cluster can do exactly-once for this pipeline (transaction APIs, ACLs,
   and the commit task's retry schedule fits inside ``transaction.timeout.ms``).
2. ``submit``: spark-submit runs ``dags/eos_pipeline_job.py:build_dataframe`` on this run's
   batch of events and writes the result with one Kafka transaction per Spark partition,
   left open ("prepared"); the job's last act is the checkpoint manifest (the vote). The
   checkpoint id comes from the run (its logical date, else its run_after, in microseconds),
   so a retry or a cleared rerun of this run prepares the same checkpoint (and finds its
   manifest instead of writing again), and every other run gets its own. The batch is the
   run's *input identity*: a second run of a batch already written (the trigger form used
   twice, a colleague re-running a batch that had succeeded, the CLI or REST API) writes
   nothing: ``submit`` and ``commit`` are skipped and the log names the run that wrote it.
   Set the ``reprocess`` param to write a batch again on purpose (recorded in the manifest).
3. ``commit``: commits every transaction the manifest lists, then marks it COMMITTED, and
   emits one Asset event for ``kafka://host:port/<topic>`` (``dags/eos_downstream.py`` is
   scheduled on it; a rerun that commits nothing new emits none).

A run not done ``KAFKA_EOS_PIPELINE_DEADLINE_FRACTION`` (default 0.5, ``off``: none) of the
transaction timeout after it was queued misses its deadline: an alert (in the triggerer's log, at
ERROR) names every PREPARED checkpoint of the pipeline, its time left and the runbook page.

Connections: ``kafka_eos_default`` (type ``kafka_eos``; extra = librdkafka config plus the
manifest store, e.g. ``{"bootstrap.servers": "broker:9092", "manifest_base_uri":
"s3://bucket/kafka-eos/manifests"}``; ``eos_cleanup`` reads the same store) and
``spark_local`` (type ``spark``, host ``local[2,3]`` or your cluster's master). With
``KAFKA_EOS_PIPELINE_SPARK=connect`` the submit task is ``SparkEosConnectOperator`` on a Spark
Connect server instead (connection ``spark_connect_default``, type ``spark_connect``;
docs/user-guide/spark-connect.md).
``max_active_runs=1`` keeps checkpoints in order. Every setting below has an environment
variable, and each run can override it with params.

Runs work however they start: on the schedule, or triggered from the UI, the CLI or the REST
API with or without a logical date. The batch to read is the ``batch`` param when given, else
the run's own time (data interval end when the run has one, else ``run_after``) as
``YYYYMMDDTHHMMSS``; no template depends on ``logical_date`` (``ts_nodash`` and friends are
undefined for a run triggered without one). No input is never a silent green run: a batch
from the run's time with no folder, or a batch folder without event files, skips ``submit``
and ``commit`` with the reason in the submit log; a ``batch`` typed by hand with no folder, or
an ``input_dir`` that does not exist, fails ``submit`` at once, without retries, naming the
folder (docs/ui.md, "Empty input").
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG, Asset, Param

from airflow_provider_kafka_eos.assets.lineage import kafka_asset_uri
from airflow_provider_kafka_eos.operators.commit import KafkaCommitTransactionsOperator
from airflow_provider_kafka_eos.operators.connect_submit import SparkEosConnectOperator
from airflow_provider_kafka_eos.operators.preflight import KafkaEosPreflightOperator
from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator
from airflow_provider_kafka_eos.tasks.deadline import deadline_fraction, transaction_deadline

_STATE = Path(os.environ.get("AIRFLOW_HOME") or tempfile.gettempdir()) / "eos-pipeline"
PIPELINE_ID = os.environ.get("KAFKA_EOS_PIPELINE_ID", "user_activity")
TOPIC = os.environ.get("KAFKA_EOS_PIPELINE_TOPIC", "user-activity-per-user")
# The connection's bootstrap.servers as eos_downstream names it: the topic Asset's URI (first server).
BOOTSTRAP_SERVERS = os.environ.get("KAFKA_EOS_PIPELINE_BOOTSTRAP_SERVERS", "broker:9092")
INPUT_DIR = os.environ.get("KAFKA_EOS_PIPELINE_INPUT_DIR", str(_STATE / "input"))
# None: the kafka_eos connection's manifest_base_uri (one store for this DAG and eos_cleanup).
MANIFEST_BASE_URI = os.environ.get("KAFKA_EOS_MANIFEST_BASE_URI") or None
KAFKA_EOS_CONN_ID = os.environ.get("KAFKA_EOS_PIPELINE_CONN_ID", "kafka_eos_default")
# "submit" (spark-submit per run) or "connect" (a long-lived Spark Connect server).
SPARK_MODE = os.environ.get("KAFKA_EOS_PIPELINE_SPARK", "submit")
SPARK_CONN_ID = os.environ.get("KAFKA_EOS_PIPELINE_SPARK_CONN_ID",
                               "spark_connect_default" if SPARK_MODE == "connect" else "spark_local")
# More spark-submit --conf settings as a JSON object (e.g. a standalone cluster's executor Python).
def _spark_conf(text: str) -> dict[str, str]:
    try:
        conf = json.loads(text)
    except ValueError as err:
        raise ValueError(f"KAFKA_EOS_PIPELINE_SPARK_CONF is not JSON ({err}): give a JSON object of "
                         "spark-submit --conf settings, e.g. {\"spark.executor.memory\": \"1g\"}") from None
    if not isinstance(conf, dict) or not all(isinstance(v, str) for v in conf.values()):
        raise ValueError("KAFKA_EOS_PIPELINE_SPARK_CONF must be a JSON object of string settings, "
                         f"got {text!r}")
    return conf


SPARK_CONF = _spark_conf(os.environ.get("KAFKA_EOS_PIPELINE_SPARK_CONF") or "{}")
TRANSACTION_TIMEOUT_MS = int(os.environ.get("KAFKA_EOS_PIPELINE_TXN_TIMEOUT_MS", "900000"))
# The run's deadline: this fraction of the transaction timeout after it was queued, an alert naming
# every PREPARED checkpoint (docs/user-guide/airflow-3.md, "A deadline before the transaction timeout").
DEADLINE_FRACTION = deadline_fraction(os.environ.get("KAFKA_EOS_PIPELINE_DEADLINE_FRACTION"),
                                      setting="KAFKA_EOS_PIPELINE_DEADLINE_FRACTION")
# A cron expression or preset; "none" for manual and API triggers only.
SCHEDULE = os.environ.get("KAFKA_EOS_PIPELINE_SCHEDULE", "@hourly")
# 1 keeps checkpoints in order; runs of the same batch never both write, whatever this is.
MAX_ACTIVE_RUNS = int(os.environ.get("KAFKA_EOS_PIPELINE_MAX_ACTIVE_RUNS", "1"))
# CeleryExecutor: pin spark-submit to the workers that can run Spark and the commit to any other
# (blank: the deployment's [operators] default_queue). The commit needs only Kafka and the store.
SUBMIT_QUEUE = {"queue": q} if (q := os.environ.get("KAFKA_EOS_PIPELINE_SUBMIT_QUEUE")) else {}
COMMIT_QUEUE = {"queue": q} if (q := os.environ.get("KAFKA_EOS_PIPELINE_COMMIT_QUEUE")) else {}
APPLICATION = f"{Path(__file__).resolve().with_name('eos_pipeline_job.py')}:build_dataframe"
BATCH_FORMAT = "%Y%m%dT%H%M%S"


def _job_module() -> Any:
    """``eos_pipeline_job.py`` beside this file (it owns the input layout), whatever sys.path holds."""
    import importlib.util

    path = Path(APPLICATION.rpartition(":")[0])
    spec = importlib.util.spec_from_file_location("eos_pipeline_job_for_dag", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_batch(dag_run: Any, params: Any) -> str:
    """The input batch of this run: ``params.batch``, else the run's time as ``YYYYMMDDTHHMMSS``.

    The run's time is its data interval end when it has one (scheduled runs, and manual runs
    given a logical date), else ``run_after`` (a manual run without a logical date), the same
    order the checkpoint id follows, so a rerun of a run reads the same batch.

    A batch with no input never gives a silent green run (the submit task renders this before
    spark-submit starts, so nothing is prepared): a batch derived from the run's time with no
    folder, or any batch whose folder holds no event file, *skips* the submit task (and so the
    commit) with the reason in its log, because an hour without events is normal; a batch typed
    by hand whose folder does not exist *fails* at once, without retries, because it is a typo or
    the wrong input folder. A missing input folder fails likewise (see docs/ui.md).
    """
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    job = _job_module()

    batch = (params or {}).get("batch")
    explicit = batch not in (None, "") and bool(str(batch).strip())
    if explicit:
        batch = str(batch).strip()
    else:
        when = getattr(dag_run, "data_interval_end", None) or getattr(dag_run, "run_after", None)
        if not isinstance(when, datetime):
            raise ValueError("this run has neither a data interval nor run_after: set the batch param")
        batch = when.strftime(BATCH_FORMAT)
    problem = job.input_problem(str((params or {}).get("input_dir") or INPUT_DIR), batch)
    if problem is None:
        return batch
    kind, reason = problem
    if kind == job.EMPTY_BATCH or (kind == job.NO_BATCH_FOLDER and not explicit):
        raise AirflowSkipException(f"{reason}; nothing to write, no checkpoint prepared")
    next_step = (
        "check the Batch param (leave it blank for the run's own time) and trigger again"
        if kind == job.NO_BATCH_FOLDER
        else "fix the Input folder param or KAFKA_EOS_PIPELINE_INPUT_DIR and trigger again"
    )
    raise AirflowFailException(f"{reason}. Nothing was submitted. Next step: {next_step}")


with DAG(
    dag_id="eos_pipeline",
    description="JSON events -> PySpark enrich/aggregate -> Kafka, exactly once (two-phase commit)",
    schedule=None if SCHEDULE.strip().lower() in ("", "none") else SCHEDULE,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=MAX_ACTIVE_RUNS,
    tags=["kafka-eos", "example"],
    doc_md=__doc__,
    user_defined_macros={"run_batch": run_batch},
    # A run's conf may name another pipeline_id / manifest_base_uri: the alert reads those.
    deadline=transaction_deadline(kafka_eos_conn_id=KAFKA_EOS_CONN_ID, pipeline_id=PIPELINE_ID,
                                  transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
                                  manifest_base_uri=MANIFEST_BASE_URI, fraction=DEADLINE_FRACTION),
    params={
        "pipeline_id": Param(
            PIPELINE_ID,
            type="string",
            minLength=1,
            title="Pipeline id",
            description="Names the manifest folder (<store>/<pipeline id>/) and is the transactional-id "
            "prefix (ids <pipeline id>-<partition>-<checkpoint>); eos_cleanup watches <pipeline id>-.",
        ),
        "topic": Param(TOPIC, type="string", minLength=1, title="Output topic",
                       description="The Kafka topic the per-user aggregates are written to, exactly once."),
        "input_dir": Param(
            INPUT_DIR,
            type="string",
            minLength=1,
            title="Input folder",
            description="One sub-folder of JSON event files per batch: <input folder>/<batch>/. "
            "A folder that does not exist fails the run.",
        ),
        "batch": Param(
            None,
            type=["null", "string"],
            title="Batch",
            description="The batch (sub-folder of the input folder) to process, e.g. 20260301T100000. Blank: "
            "the run's own time (data interval end, else run_after); a blank batch with no folder "
            "skips the run, a named batch with no folder fails it.",
        ),
        "manifest_base_uri": Param(
            MANIFEST_BASE_URI,
            type=["null", "string"],
            title="Manifest store",
            description="Where the checkpoint manifest is written (blank: the kafka_eos connection's "
            "Manifest store URI, which eos_cleanup reads too).",
        ),
        "spark_partitions": Param(
            2,
            type="integer",
            minimum=1,
            title="Spark partitions",
            description="Partitions of the output DataFrame: one Kafka transaction each.",
        ),
        "reprocess": Param(
            False,
            type="boolean",
            title="Reprocess",
            description="Write the batch again although an earlier run already wrote it (recorded in the "
            "checkpoint's manifest). Off: a batch already written is skipped, nothing written twice.",
        ),
    },
    default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
) as dag:
    preflight = KafkaEosPreflightOperator(
        task_id="preflight",
        transactional_id_prefix="{{ params.pipeline_id }}",
        topics="{{ params.topic }}",
        transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
        job_duration_budget=timedelta(minutes=5),
        commit_task_id="commit",
        kafka_eos_conn_id=KAFKA_EOS_CONN_ID,
        # The DAG's retries: a refusal (a setting, an ACL, a timeout budget) fails at once anyway
        # (the operator raises AirflowFailException), so retries only cover a broker or API server
        # that was briefly away. The soak found runs lost to that with retries=0.
    )

    # spark-submit's own settings apply to spark-submit only: a Connect server has its own.
    spark_launch: dict[str, Any] = {"conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
                                             **SPARK_CONF}} if SPARK_MODE != "connect" else {}
    submit = (SparkEosConnectOperator if SPARK_MODE == "connect" else SparkEosSubmitOperator)(
        task_id="submit",
        pipeline_id="{{ params.pipeline_id }}",
        topic="{{ params.topic }}",
        manifest_base_uri="{{ params.manifest_base_uri or '' }}",
        application_callable=APPLICATION,
        application_params={
            "input_dir": "{{ params.input_dir }}",
            "batch": "{{ run_batch(dag_run, params) }}",
            "partitions": "{{ params.spark_partitions }}",
        },
        # The batch is the input: a second run of the same batch writes nothing (docs/user-guide/pipeline.md).
        input_id="{{ run_batch(dag_run, params) }}",
        reprocess="{{ params.reprocess }}",
        naming_strategy="INCREMENTING",
        lineage_inputs=[("file", "{{ params.input_dir }}")],  # reported to OpenLineage with the topic
        transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
        kafka_eos_conn_id=KAFKA_EOS_CONN_ID,
        conn_id=SPARK_CONN_ID,
        **spark_launch,
        execution_timeout=timedelta(minutes=5),
        **SUBMIT_QUEUE,
    )

    commit = KafkaCommitTransactionsOperator(
        task_id="commit",
        submit_task_id="submit",
        kafka_eos_conn_id=KAFKA_EOS_CONN_ID,
        # Its whole retry schedule must end before transaction.timeout.ms (preflight checks it).
        retries=3,
        retry_delay=timedelta(seconds=15),
        execution_timeout=timedelta(minutes=1),
        # Lists this task as the topic's producer on the Asset page; the event still comes only
        # from a try that committed records to it (assets/events.py).
        outlets=[Asset(kafka_asset_uri(BOOTSTRAP_SERVERS, TOPIC))],
        **COMMIT_QUEUE,
    )

    preflight >> submit >> commit
