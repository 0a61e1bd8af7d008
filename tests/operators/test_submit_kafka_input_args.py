"""The submit operator's Kafka-input arguments: passed to the job, or refused by name before anything runs."""

from __future__ import annotations

import pytest

from airflow_provider_kafka_eos.kafka.errors import UsageError
from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator
from airflow_provider_kafka_eos.spark import job


def _flags(op: SparkEosSubmitOperator) -> list[str]:
    """The Kafka-input part of the job's command line, as the operator builds it."""
    args = op._job_args(1)
    return args[args.index("--input-topics"):] if "--input-topics" in args else []


def _op(**kwargs):
    return SparkEosSubmitOperator(task_id="submit", pipeline_id="orders", topic="out",
                                  application_callable="m:f", **kwargs)


def test_input_topics_group_and_start_reach_the_job_as_its_arguments():
    op = _op(input_topics="in-a, in-b", input_group="orders-reader", input_start="timestamp:1767225600000",
             skip_lost_input_ranges=True)
    op._validate_arguments()
    args = _flags(op)
    assert args == ["--input-topics", "in-a,in-b", "--input-group", "orders-reader", "--input-start",
                    "timestamp:1767225600000", "--skip-lost-input-ranges"]
    base = ["--pipeline-id", "p", "--topic", "t", "--transactional-id-prefix", "p", "--checkpoint-id", "1",
            "--manifest-base-uri", "/m", "--application", "m:f"]
    parsed = job.build_arg_parser().parse_args([*base, *args])
    assert (parsed.input_topics, parsed.input_group, parsed.skip_lost_input_ranges) == (
        "in-a,in-b", "orders-reader", True)
    assert _flags(_op(input_topics=["in"], input_group="g", input_start="earliest"))[:2] == [
        "--input-topics", "in"]
    assert _flags(_op()) == []


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"input_topics": ["in"], "input_start": "earliest"}, "input_topics needs input_group"),
    ({"input_topics": ["in"], "input_group": "g"}, "input_topics needs input_start"),
    ({"input_topics": ["in"], "input_group": "g", "input_start": "newest"},
     "input_start='newest' is not a start"),
    ({"input_topics": ["out"], "input_group": "g", "input_start": "earliest"}, "includes the output topic"),
    ({"input_topics": ["bad topic"], "input_group": "g", "input_start": "earliest"}, "input_topics"),
    ({"input_group": "g"}, "without input_topics"),
    ({"input_topics": " ", "input_group": "g", "input_start": "earliest"}, "without input_topics"),
])
def test_an_incomplete_or_wrong_kafka_input_is_refused_by_name(kwargs, message):
    with pytest.raises(UsageError, match=message):
        _op(**kwargs)._validate_arguments()
