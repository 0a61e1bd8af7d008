"""SparkEosSubmitOperator's 2PC / producer switches reach the job; a contradiction is refused at
DAG-parse time (before any Spark job or Kafka request)."""

from __future__ import annotations

import pytest

from airflow_provider_kafka_eos.kafka.errors import UsageError
from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator

pytestmark = pytest.mark.dag


def _submit(**kwargs):
    return SparkEosSubmitOperator(task_id="submit", pipeline_id="orders", topic="orders-out",
                                  manifest_base_uri="/tmp/manifests", application_callable="my_jobs:build",
                                  **kwargs)


def test_two_phase_and_producer_reach_the_job_arguments():
    args = _submit(two_phase_commit=True, producer="arrow")._job_args(7)
    assert "--two-phase-commit" in args and args[args.index("--producer") + 1] == "arrow"
    plain = _submit()._job_args(7)
    assert "--two-phase-commit" not in plain and "--producer" not in plain


def test_two_phase_with_librdkafka_or_an_unknown_producer_is_refused():
    with pytest.raises(UsageError, match="needs producer='arrow'") as excinfo:
        _submit(two_phase_commit=True, producer="librdkafka")
    assert "kafka-eos-txn runbook two-phase-commit (" in str(excinfo.value)
    with pytest.raises(UsageError, match="arrow or librdkafka"):
        _submit(producer="java")
