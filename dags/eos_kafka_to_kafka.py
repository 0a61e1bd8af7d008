"""Example exactly-once Kafka -> PySpark -> Kafka pipeline: the input's offsets belong to the checkpoint.

Copy and adapt. Each run is one checkpoint:

1. ``submit``: the job first *plans* the checkpoint's input: per partition of the input topic(s)
   the range ``[from, to)`` with ``from`` = where the last COMMITTED checkpoint ended (the manifest
   store is the source of truth) and ``to`` = the last stable offset now; the plan is stored before
   anything is read, so a retry reads the same range. Spark's own Kafka source reads exactly that
   range (``read_committed``: aborted input never arrives), ``eos_kafka_to_kafka_job.py`` transforms
   it, and the result is prepared in Kafka with one transaction per Spark partition, plus one
   transaction that moves the consumer group's offsets to ``to``. The manifest lists them all.
2. ``commit``: commits every transaction the manifest lists: the output and the group's offsets
   become visible together. A checkpoint given up (``kafka-eos-txn abort --manifest``)
   moves nothing: the next run reads its range again.

The first checkpoint starts where ``input_start`` says (``earliest``, ``latest``, ``group`` to
continue from the group's committed offsets when migrating from an existing consumer, or
``timestamp:<epoch ms>``); later ones continue on their own. ``kafka-consumer-groups.sh --describe
--group <group>`` shows the pipeline's lag. Spark's Kafka connector must be on the job's classpath:
``packages`` below names it for the Spark version the job runs (change it to match yours), or
``KAFKA_EOS_K2K_SPARK_JARS`` lists its jars on disk instead (comma-separated; ``./run demo --pipeline
kafka-to-kafka`` uses the Maven-fetched cache this way, so spark-submit resolves nothing at run time).

``KAFKA_EOS_K2K_SCHEDULE=committed-input`` starts runs on committed input instead of the clock: an
``AssetWatcher`` with the provider's ``CommittedInputTrigger`` fires when ``KAFKA_EOS_K2K_MIN_RECORDS``
committed input records (default 1000) wait past the last COMMITTED checkpoint, or when one has waited
``KAFKA_EOS_K2K_MAX_WAIT_S`` seconds (default 300); aborted input and open transactions start nothing
(docs/user-guide/airflow-3.md, "Runs started by committed input").

The same transaction deadline as ``eos_pipeline`` (``KAFKA_EOS_PIPELINE_DEADLINE_FRACTION``).

Connections as in ``eos_pipeline``: ``kafka_eos_default`` (librdkafka config + ``manifest_base_uri``)
and ``spark_local``. ``max_active_runs=1``: a newer checkpoint refuses to plan while an older one is
still PREPARED (docs/user-guide/kafka-to-kafka.md).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG, Asset, AssetWatcher, Param

from airflow_provider_kafka_eos.assets.lineage import kafka_asset_uri
from airflow_provider_kafka_eos.operators.commit import KafkaCommitTransactionsOperator
from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator
from airflow_provider_kafka_eos.tasks.deadline import deadline_fraction, transaction_deadline
from airflow_provider_kafka_eos.triggers.committed_input import CommittedInputTrigger

PIPELINE_ID = os.environ.get("KAFKA_EOS_K2K_PIPELINE_ID", "events_upper")
INPUT_TOPIC = os.environ.get("KAFKA_EOS_K2K_INPUT_TOPIC", "events")
OUTPUT_TOPIC = os.environ.get("KAFKA_EOS_K2K_OUTPUT_TOPIC", "events-upper")
GROUP = os.environ.get("KAFKA_EOS_K2K_GROUP", "events-upper-pipeline")
START = os.environ.get("KAFKA_EOS_K2K_START", "earliest")
KAFKA_EOS_CONN_ID = os.environ.get("KAFKA_EOS_PIPELINE_CONN_ID", "kafka_eos_default")
# Where manifests and input plans live; unset: the kafka_eos connection's manifest_base_uri (as eos_pipeline).
MANIFEST_BASE_URI = os.environ.get("KAFKA_EOS_MANIFEST_BASE_URI") or None
SPARK_CONN_ID = os.environ.get("KAFKA_EOS_PIPELINE_SPARK_CONN_ID", "spark_local")
# The connector of the Spark version the job runs: org.apache.spark:spark-sql-kafka-0-10_<scala>:<version>.
SPARK_KAFKA_PACKAGE = os.environ.get("KAFKA_EOS_K2K_SPARK_KAFKA_PACKAGE",
                                     "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0")
SPARK_KAFKA_JARS = os.environ.get("KAFKA_EOS_K2K_SPARK_JARS", "").strip()  # local jars instead of packages
SCHEDULE = os.environ.get("KAFKA_EOS_K2K_SCHEDULE", "*/10 * * * *")
TRANSACTION_TIMEOUT_MS = int(os.environ.get("KAFKA_EOS_PIPELINE_TXN_TIMEOUT_MS", "900000"))
DEADLINE_FRACTION = deadline_fraction(os.environ.get("KAFKA_EOS_PIPELINE_DEADLINE_FRACTION"),
                                      setting="KAFKA_EOS_PIPELINE_DEADLINE_FRACTION")  # as eos_pipeline
APPLICATION = f"{Path(__file__).resolve().with_name('eos_kafka_to_kafka_job.py')}:build_dataframe"
BOOTSTRAP_SERVERS = os.environ.get("KAFKA_EOS_PIPELINE_BOOTSTRAP_SERVERS", "broker:9092")  # names the Asset
COMMITTED_INPUT = "committed-input"


def _schedule() -> object:
    """The cron schedule, none, or runs started by committed input (an AssetWatcher on the input topic)."""
    if SCHEDULE.strip().lower() in ("", "none"):
        return None
    if SCHEDULE.strip().lower() != COMMITTED_INPUT:
        return SCHEDULE
    trigger = CommittedInputTrigger(
        kafka_eos_conn_id=KAFKA_EOS_CONN_ID, pipeline_id=PIPELINE_ID, input_topic=INPUT_TOPIC, group=GROUP,
        manifest_base_uri=MANIFEST_BASE_URI,
        min_records=int(os.environ.get("KAFKA_EOS_K2K_MIN_RECORDS", "1000")),
        max_wait_s=float(os.environ.get("KAFKA_EOS_K2K_MAX_WAIT_S", "300")),
    )
    watcher = AssetWatcher(name=f"{PIPELINE_ID}-committed-input", trigger=trigger)
    return [Asset(kafka_asset_uri(BOOTSTRAP_SERVERS, INPUT_TOPIC), watchers=[watcher])]


with DAG(
    dag_id="eos_kafka_to_kafka",
    description="Kafka -> PySpark -> Kafka, exactly once: input offsets and output in one two-phase commit",
    schedule=_schedule(),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka-eos", "example"],
    doc_md=__doc__,
    deadline=transaction_deadline(kafka_eos_conn_id=KAFKA_EOS_CONN_ID, pipeline_id=PIPELINE_ID,
                                  transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
                                  manifest_base_uri=MANIFEST_BASE_URI, fraction=DEADLINE_FRACTION),
    params={
        "input_topic": Param(INPUT_TOPIC, type="string", minLength=1, title="Input topic"),
        "output_topic": Param(OUTPUT_TOPIC, type="string", minLength=1, title="Output topic"),
        "group": Param(GROUP, type="string", minLength=1, title="Consumer group",
                       description="Its committed offsets follow the last COMMITTED checkpoint (lag tools)."),
        "input_start": Param(START, type="string", minLength=1, title="First checkpoint starts at",
                             description="earliest, latest, group or timestamp:<epoch ms>; used only until "
                             "the first checkpoint commits."),
        "skip_lost_input_ranges": Param(False, type="boolean", title="Skip lost input ranges",
                                        description="Go on past input Kafka no longer has (recorded in the "
                                        "manifest). Off: such a range fails the run by name."),
    },
    default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
) as dag:
    submit = SparkEosSubmitOperator(
        task_id="submit",
        pipeline_id=PIPELINE_ID,
        topic="{{ params.output_topic }}",
        manifest_base_uri=MANIFEST_BASE_URI,
        application_callable=APPLICATION,
        input_topics="{{ params.input_topic }}",
        input_group="{{ params.group }}",
        input_start="{{ params.input_start }}",
        skip_lost_input_ranges="{{ params.skip_lost_input_ranges }}",
        transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
        kafka_eos_conn_id=KAFKA_EOS_CONN_ID,
        conn_id=SPARK_CONN_ID,
        packages=None if SPARK_KAFKA_JARS else SPARK_KAFKA_PACKAGE,
        jars=SPARK_KAFKA_JARS or None,
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"},
        execution_timeout=timedelta(minutes=10),
    )
    commit = KafkaCommitTransactionsOperator(
        task_id="commit",
        submit_task_id="submit",
        kafka_eos_conn_id=KAFKA_EOS_CONN_ID,
        retries=3,
        retry_delay=timedelta(seconds=15),
        execution_timeout=timedelta(minutes=1),
        # The output topic's Asset, declared: its event (one per committed checkpoint, from the try
        # that committed it) carries the checkpoint's input ranges as partition_key.
        outlets=[Asset(kafka_asset_uri(BOOTSTRAP_SERVERS, OUTPUT_TOPIC))],
    )
    submit >> commit
