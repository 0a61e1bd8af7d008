"""The exactly-once job on a Spark standalone cluster whose executors lack this provider.

Every job is spark-submitted in client deploy mode to ``spark://`` (the driver runs this
interpreter, the executors the cached provider-less environment), and every data-path test
ends with a read_committed consumer counting each key exactly once. The exactly-once scenarios
themselves (a job prepared and committed, a task killed mid-write, the driver killed after its
manifest, rerun, re-trigger, give-up) run on this cluster in tests/system/conformance; here: the
executors' missing requirements and the submit operator against ``spark://``.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
from cluster_jobs import KEYS_APP, _keys, _tail, submit

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    find_manifests,
)
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.operators.commit import KafkaCommitTransactionsOperator
from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator
from airflow_provider_kafka_eos.spark.requirements import RUNBOOK, install_specs, requirements_for
from airflow_provider_kafka_eos.spark.writer import DEFAULT_PRODUCER
from kafka_eos_testing.spark_cluster import executor_python_env
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def test_executors_lacking_a_job_side_requirement_fail_with_one_line(
    spark_cluster, kafka_broker, tmp_path, unique_name
):
    """Executors whose Python has pyarrow and numpy but none of the Kafka-side packages."""
    python = executor_python_env(("pyarrow", "numpy"), name="executor-without-kafka-clients")
    missing = [r.distribution for r in requirements_for(DEFAULT_PRODUCER)
               if r.distribution not in ("pyarrow", "numpy")]
    prefix, topic = unique_name("noreq"), unique_name("out")
    conf = {"spark.pyspark.python": python}
    result = submit(spark_cluster, kafka_broker, tmp_path, prefix, topic, 1, conf=conf)
    assert result.returncode == 2, _tail(result)
    # PySpark's driver writes its stderr through spark-submit's stdout.
    lines = [line for line in result.stdout.splitlines() if line.startswith("kafka-eos job:")]
    assert len(lines) == 1, _tail(result)
    line = lines[0]
    specs = install_specs()  # the bounds pyproject.toml declares, read from this install's metadata
    assert python in line and f"pip install {' '.join(repr(specs[m]) for m in missing)}" in line, line
    assert f"docs/runbook/{RUNBOOK}.md" in line and "Traceback" not in line and "Pickl" not in line
    # Refused before producing: no transaction was opened, no manifest written, no record sent.
    with TransactionAdmin(KafkaClientConfig.from_mapping(kafka_broker.client_config())) as admin:
        assert admin.list(prefixes=[prefix]) == []
    assert find_manifests(str(tmp_path / "m"), prefix) == []
    with pytest.raises(LookupError, match="does not exist"):
        count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted")


def test_submit_operator_submits_to_the_cluster_in_client_mode(
    spark_cluster, kafka_broker, tmp_path, unique_name, monkeypatch
):
    """SparkEosSubmitOperator -> spark://, client deploy mode, executors on the provider-less Python."""
    host, port = spark_cluster.master_url.removeprefix("spark://").rsplit(":", 1)
    spark_conn = unique_name("spark").replace("-", "_")
    kafka_conn = unique_name("kafka_eos").replace("-", "_")
    spark = {"conn_type": "spark", "host": f"spark://{host}", "port": int(port),
             "extra": {"deploy-mode": "client"}}
    monkeypatch.setenv(f"AIRFLOW_CONN_{spark_conn.upper()}", json.dumps(spark))
    monkeypatch.setenv(f"AIRFLOW_CONN_{kafka_conn.upper()}", json.dumps(
        {"conn_type": "kafka_eos", "extra": kafka_broker.client_config()}
    ))  # fmt: skip
    prefix, topic = unique_name("operator"), unique_name("out")
    conf = {k: v for k, v in spark_cluster.submit_conf().items() if k != "spark.pyspark.python"}
    operator = SparkEosSubmitOperator(
        task_id="submit",
        pipeline_id=prefix,
        topic=topic,
        manifest_base_uri=str(tmp_path / "m"),
        application_callable=f"{KEYS_APP}:build_dataframe",
        application_params={"tag": prefix, "count": 200, "partitions": 2},
        kafka_eos_conn_id=kafka_conn,
        conn_id=spark_conn,
        checkpoint_id=5,
        executor_python=spark_cluster.executor_python,
        conf=conf,
    )
    run = SimpleNamespace(dag_id="cluster_pipeline", run_id=f"manual__{prefix}", logical_date=None,
                          run_after=datetime(2026, 3, 1, tzinfo=timezone.utc))
    ti = SimpleNamespace(try_number=1, xcom_push=lambda *args, **kwargs: None)  # no scheduler here
    uri = operator.execute({"dag_run": run, "ti": ti})
    assert operator.conf["spark.pyspark.python"] == spark_cluster.executor_python
    report = KafkaCommitTransactionsOperator(task_id="commit", manifest_uri=uri, kafka_eos_conn_id=kafka_conn)
    assert report.execute({})["records"] == 200
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys(prefix, 200))
