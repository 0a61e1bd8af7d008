"""kafka-python and py4j at WARNING by default, with a switch (``kafka/log_levels.py``).

The hook is given a real Airflow connection and talks to the embedded broker; the records are
what Python logging hands Airflow's task log handler (caplog sits at the root like it).
"""

from __future__ import annotations

import json
import logging

import pytest

from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
from airflow_provider_kafka_eos.kafka import log_levels
from airflow_provider_kafka_eos.kafka.errors import ConfigError


@pytest.fixture(autouse=True)
def restore_levels():
    saved = {name: logging.getLogger(name).level for name in log_levels.CLIENT_LOGGERS}
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)


def _client_chatter(caplog, kafka_broker, monkeypatch) -> list[logging.LogRecord]:
    monkeypatch.setenv("AIRFLOW_CONN_EOS_LOGS", json.dumps(
        {"conn_type": "kafka_eos", "extra": {"bootstrap.servers": kafka_broker.bootstrap}}))
    for name in log_levels.CLIENT_LOGGERS:  # as a fresh task process finds them
        logging.getLogger(name).setLevel(logging.NOTSET)
    caplog.clear()
    with caplog.at_level(logging.DEBUG), KafkaEosHook("eos_logs").transaction_admin() as admin:
        admin.list()
    return [r for r in caplog.records if r.name.startswith("kafka") and r.levelno < logging.WARNING]


@pytest.mark.broker
def test_a_task_shows_no_kafka_python_info_by_default(caplog, kafka_broker, monkeypatch):
    monkeypatch.delenv(log_levels.ENV_CLIENT_LOG_LEVEL, raising=False)
    assert _client_chatter(caplog, kafka_broker, monkeypatch) == []
    assert logging.getLogger("kafka").level == logging.WARNING


@pytest.mark.broker
def test_the_switch_turns_the_chatter_back_up(caplog, kafka_broker, monkeypatch):
    monkeypatch.setenv(log_levels.ENV_CLIENT_LOG_LEVEL, "info")
    chatter = _client_chatter(caplog, kafka_broker, monkeypatch)
    assert chatter and all(r.levelno == logging.INFO for r in chatter)


def test_a_value_that_is_not_a_level_is_refused_by_name(monkeypatch):
    monkeypatch.setenv(log_levels.ENV_CLIENT_LOG_LEVEL, "LOUD")
    with pytest.raises(ConfigError) as err:
        log_levels.quiet_client_loggers()
    assert "KAFKA_EOS_CLIENT_LOG_LEVEL='LOUD' is not a Python log level" in str(err.value)
    monkeypatch.setenv("AIRFLOW_CONN_EOS_LOUD", json.dumps(
        {"conn_type": "kafka_eos", "extra": {"bootstrap.servers": "127.0.0.1:1"}}))
    ok, message = KafkaEosHook("eos_loud").test_connection()  # named before any connection attempt
    assert not ok and "KAFKA_EOS_CLIENT_LOG_LEVEL" in message


@pytest.mark.parametrize(
    "raw, level", [(None, "WARN"), ("info", "INFO"), ("WARNING", "WARN"), ("off", "OFF")]
)
def test_spark_level(monkeypatch, raw, level):
    if raw is None:
        monkeypatch.delenv(log_levels.ENV_SPARK_LOG_LEVEL, raising=False)
    else:
        monkeypatch.setenv(log_levels.ENV_SPARK_LOG_LEVEL, raw)
    assert log_levels.spark_log_level() == level


def test_spark_level_refuses_a_python_only_name(monkeypatch):
    monkeypatch.setenv(log_levels.ENV_SPARK_LOG_LEVEL, "CRITICAL")
    with pytest.raises(ConfigError, match="KAFKA_EOS_SPARK_LOG_LEVEL='CRITICAL' is not a Spark log level"):
        log_levels.spark_log_level()
