"""The exactly-once job on a Spark standalone cluster whose executors lack this provider.

Every job is spark-submitted in client deploy mode to ``spark://`` (the driver runs this
interpreter, the executors the cached provider-less environment), and every data-path test
ends with a read_committed consumer counting each key exactly once. The exactly-once scenarios
themselves (a job prepared and committed, a task killed mid-write, the driver killed after its
manifest, rerun, re-trigger, give-up) run on this cluster in tests/system/conformance; here: the
executors' missing requirements and the submit operator against ``spark://``.
"""

from __future__ import annotations

import pytest
from cluster_jobs import _keys, _tail, operator_arguments, operator_connections, submit, task_context

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
    spark_conn, kafka_conn = operator_connections(spark_cluster, kafka_broker, monkeypatch, unique_name)
    prefix, topic = unique_name("operator"), unique_name("out")
    operator = SparkEosSubmitOperator(**operator_arguments(
        spark_cluster, spark_conn=spark_conn, kafka_conn=kafka_conn, prefix=prefix, topic=topic,
        manifest_base=tmp_path / "m", count=200,
    ))  # fmt: skip
    uri = operator.execute(task_context(prefix, try_number=1))
    assert operator.conf["spark.pyspark.python"] == spark_cluster.executor_python
    report = KafkaCommitTransactionsOperator(task_id="commit", manifest_uri=uri, kafka_eos_conn_id=kafka_conn)
    assert report.execute({})["records"] == 200
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys(prefix, 200))
