"""Operator and sensor arguments are validated by kafka/validation.py once templates are rendered,
before any connection, manifest store or Kafka request is touched (issue #13)."""

from __future__ import annotations

import pytest

from airflow_provider_kafka_eos.kafka.errors import UsageError
from airflow_provider_kafka_eos.operators.abort import KafkaAbortTransactionsOperator
from airflow_provider_kafka_eos.sensors.lingering import KafkaLingeringTransactionSensor
from airflow_provider_kafka_eos.tasks.fail_now import fail_now_exception


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"transactional_ids": ["etl-\udc80-1"]}, "lone surrogate"),
        ({"prefixes": ["p" * 40_000]}, "bytes of UTF-8"),
    ],
)
def test_abort_operator_refuses_ids_kafka_cannot_carry(kwargs, needle):
    operator = KafkaAbortTransactionsOperator(task_id="abort", kafka_eos_conn_id="no_such_conn", **kwargs)
    with pytest.raises(fail_now_exception(), match=needle) as failed:  # fails at once, no retries
        operator.execute({})  # the missing connection is never reached
    assert isinstance(failed.value.__cause__, UsageError)


def test_sensor_refuses_a_prefix_kafka_cannot_carry():
    sensor = KafkaLingeringTransactionSensor(
        task_id="sensor", kafka_eos_conn_id="no_such_conn", prefixes=["etl-\ud800"]
    )
    with pytest.raises(UsageError, match="lone surrogate"):
        sensor.scan_spec()
