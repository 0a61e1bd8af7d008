"""The spark-submit entry point: argument and configuration handling, loading user code.

Full spark-submit runs are in tests/system/faults and tests/system/dags; here the job's rules run in-process.
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_kafka_eos.kafka.errors import ConfigError, UsageError
from airflow_provider_kafka_eos.spark import job
from airflow_provider_kafka_eos.spark.writer import write_exactly_once
from kafka_eos_testing.spark import commit_manifest
from kafka_eos_testing.verify import assert_exactly_once, count_keys

ARGS = [
    "--pipeline-id", "p", "--topic", "t", "--transactional-id-prefix", "p", "--checkpoint-id", "1",
    "--manifest-base-uri", "/tmp/none", "--application", "nowhere:build",
]  # fmt: skip


def test_missing_client_config_is_a_usage_error_before_spark_starts(monkeypatch, capsys):
    monkeypatch.delenv(job.CONFIG_FILE_ENV, raising=False)
    monkeypatch.delenv(job.CONFIG_ENV, raising=False)
    assert job.main(ARGS) == 2
    err = capsys.readouterr().err
    assert job.CONFIG_FILE_ENV in err and "kafka-eos-txn runbook " in err


def test_config_file_and_inline_config_are_read_and_validated(tmp_path):
    path = tmp_path / "client.json"
    path.write_text(json.dumps({"bootstrap.servers": "b1:9092", "sasl.password": "pw"}))
    assert job.load_client_config({job.CONFIG_FILE_ENV: str(path)}).bootstrap_servers == "b1:9092"
    assert job.load_client_config({job.CONFIG_ENV: '{"bootstrap.servers": "b2:9092"}'}).bootstrap_servers == (
        "b2:9092"
    )
    with pytest.raises(ConfigError, match=r"no\.such\.key"):
        job.load_client_config({job.CONFIG_ENV: '{"bootstrap.servers": "b", "no.such.key": 1}'})
    with pytest.raises(UsageError, match="not valid JSON"):
        job.load_client_config({job.CONFIG_ENV: "{not json"})


def test_bad_params_and_bad_application_are_usage_errors(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv(job.CONFIG_ENV, '{"bootstrap.servers": "127.0.0.1:9"}')
    assert job.main([*ARGS, "--params", "[1, 2]"]) == 2
    assert "must be a JSON object" in capsys.readouterr().err
    with pytest.raises(UsageError, match="does not exist"):
        job.load_application(str(tmp_path / "missing.py"))
    (tmp_path / "app.py").write_text("def other(spark, params):\n    return None\n")
    with pytest.raises(UsageError, match="no function 'build_dataframe'"):
        job.load_application(str(tmp_path / "app.py"))


@pytest.mark.spark
@pytest.mark.broker
def test_application_file_with_a_udf_runs_on_the_executors(spark, kafka_broker, tmp_path, unique_name):
    """A function loaded from a file path must reach the Python workers (pickled by value)."""
    (tmp_path / "udf_app.py").write_text(
        "from pyspark.sql import functions as F\n"
        "@F.udf('string')\n"
        "def shout(text):\n"
        "    return text.upper()\n"
        "def build(spark, params):\n"
        "    df = spark.range(int(params['n']), numPartitions=2)\n"
        "    return df.select(shout(F.concat(F.lit('key-'), F.col('id').cast('string'))).alias('key'),\n"
        "                     F.col('id').cast('string').alias('value'))\n"
    )
    build = job.load_application(f"{tmp_path / 'udf_app.py'}:build")
    prefix, topic = unique_name("udf"), unique_name("out")
    manifest = write_exactly_once(
        build(spark, {"n": 40}),
        topic=topic,
        kafka_config=kafka_broker.client_config(),
        transactional_id_prefix=prefix,
        checkpoint_id=1,
        manifest_base_uri=str(tmp_path / "m"),
    )
    commit_manifest(kafka_broker.bootstrap, manifest)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [f"KEY-{i}" for i in range(40)])
