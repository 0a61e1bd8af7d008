"""The submit log's closing summary and the driver's log4j2 file (pure functions, no Spark)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from airflow_provider_kafka_eos.kafka.errors import ConfigError
from airflow_provider_kafka_eos.spark.log_config import DRIVER_JAVA_OPTIONS, quiet_driver_conf
from airflow_provider_kafka_eos.tasks.job_summary import job_summary


def _tp(topic: str, partition: int) -> SimpleNamespace:
    return SimpleNamespace(topic=topic, partition=partition)


def test_the_summary_names_records_transactions_partitions_time_and_status():
    manifest = SimpleNamespace(
        pipeline_id="user_activity", checkpoint_id=42, status=SimpleNamespace(value="PREPARED"),
        committables=[SimpleNamespace(record_count=60, partitions=[_tp("out", 0), _tp("out", 1)]),
                      SimpleNamespace(record_count=20, partitions=[_tp("out", 1)])],
    )
    text = job_summary(manifest, "file:///m/user_activity/checkpoint-42.json", 12.345)
    assert text == (
        "Spark job summary: pipeline user_activity, checkpoint 42: 80 record(s) in 2 transaction(s) "
        "(one per non-empty Spark partition) across 2 Kafka partition(s) of out; spark-submit took 12.3 s. "
        "Manifest PREPARED (the commit task makes them visible): file:///m/user_activity/checkpoint-42.json"
    )


def test_the_driver_starts_with_a_log4j2_file_at_the_spark_log_level(monkeypatch):
    monkeypatch.setenv("KAFKA_EOS_SPARK_LOG_LEVEL", "INFO")
    conf = quiet_driver_conf({"spark.ui.enabled": "false", DRIVER_JAVA_OPTIONS: "-Xss4m"})
    options = conf[DRIVER_JAVA_OPTIONS]
    assert options.startswith("-Xss4m -Dlog4j2.configurationFile=")
    path = options.split("=", 1)[1]
    with open(path, encoding="utf-8") as f:
        assert "rootLogger.level = info" in f.read().splitlines()
    monkeypatch.delenv("KAFKA_EOS_SPARK_LOG_LEVEL")
    default = quiet_driver_conf({})[DRIVER_JAVA_OPTIONS].split("=", 1)[1]
    with open(default, encoding="utf-8") as f:
        assert "rootLogger.level = warn" in f.read().splitlines()


def test_a_log4j2_file_of_your_own_is_kept_and_a_bad_level_is_named(monkeypatch):
    own = {DRIVER_JAVA_OPTIONS: "-Dlog4j2.configurationFile=/etc/spark/log4j2.properties"}
    assert quiet_driver_conf(own) == own
    monkeypatch.setenv("KAFKA_EOS_SPARK_LOG_LEVEL", "LOUD")
    with pytest.raises(ConfigError, match="KAFKA_EOS_SPARK_LOG_LEVEL='LOUD'"):
        quiet_driver_conf({})
