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


# (pipeline_id, transactional_id_prefix, topic): each refused by the Spark driver's writer.
DRIVER_REFUSES = [
    ("orders/eu", None, "orders"),  # the prefix defaults to the pipeline id, a folder of the store
    ("..", "orders", "orders"),
    ("orders", "p" * 40_000, "orders"),
    ("orders", "etl-\ud800", "orders"),
    ("orders", "orders", "bad topic"),
]


@pytest.mark.parametrize(("pipeline_id", "prefix", "topic"), DRIVER_REFUSES)
def test_the_submit_operator_refuses_what_the_driver_would_refuse(tmp_path, pipeline_id, prefix, topic):
    """One rule per input (kafka/validation.py): the DAG does not load with a value the job's driver
    would refuse after spark-submit started, and both say the same words. The driver is
    ``write_exactly_once`` itself, refusing before it touches the DataFrame or Kafka."""
    from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator
    from airflow_provider_kafka_eos.spark.writer import write_exactly_once

    with pytest.raises(UsageError) as driver:
        write_exactly_once(None, topic=topic, kafka_config={"bootstrap.servers": "127.0.0.1:1"},
                           transactional_id_prefix=prefix, pipeline_id=pipeline_id, checkpoint_id=1,
                           manifest_base_uri=str(tmp_path))
    with pytest.raises(UsageError) as operator:
        SparkEosSubmitOperator(task_id="submit", pipeline_id=pipeline_id, transactional_id_prefix=prefix,
                               topic=topic, application_callable="m:f", manifest_base_uri=str(tmp_path))
    assert str(operator.value) == str(driver.value)


def test_a_templated_id_is_checked_once_rendered():
    from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator

    operator = SparkEosSubmitOperator(task_id="submit", pipeline_id="{{ params.pipeline }}", topic="t",
                                      application_callable="m:f", input_id="{{ ds }}")
    operator.pipeline_id = operator.transactional_id_prefix = "orders/eu"  # as rendered
    with pytest.raises(UsageError, match="one folder name"):
        operator._validate_arguments()
