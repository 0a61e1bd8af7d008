"""SparkEosConnectOperator on a local Spark Connect server (the session's shared server) and the
embedded broker: the submit operator's semantics with the job's body run against the server.

Each test ends with a read_committed key count.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, read_manifest
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.operators.connect_submit import SparkEosConnectOperator
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.dag]

APP = """
def build(spark, params):
    return spark.range(params["n"], numPartitions=2).selectExpr(
        "concat('{tag}-', cast(id as string)) as key", "cast(id as string) as value")
"""


@pytest.fixture
def connections(monkeypatch, kafka_broker, spark_connect_server, connect_mode_scoped):
    host, port = spark_connect_server.url.removeprefix("sc://").split(":")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_TEST",
                       json.dumps({"conn_type": "spark_connect", "host": host, "port": int(port)}))
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_EOS_CONNECT",
                       json.dumps({"conn_type": "kafka_eos", "extra": kafka_broker.client_config()}))


def _operator(tmp_path, pipeline, topic, tag, **kwargs):
    app = tmp_path / f"connect_app_{tag}.py"
    app.write_text(APP.replace("{tag}", tag))
    return SparkEosConnectOperator(
        task_id="submit", pipeline_id=pipeline, topic=topic, manifest_base_uri=str(tmp_path / "store"),
        application_callable=f"{app}:build", application_params={"n": 60},
        kafka_eos_conn_id="kafka_eos_connect", conn_id="spark_connect_test", **kwargs)


def _context(run_id, try_number, run_after=datetime(2026, 11, 28, tzinfo=timezone.utc)):
    dag_run = SimpleNamespace(dag_id="connect_dag", run_id=run_id, logical_date=None, run_after=run_after)
    pushed = {}
    ti = SimpleNamespace(try_number=try_number, xcom_push=lambda key, value: pushed.__setitem__(key, value))
    return {"dag_run": dag_run, "ti": ti, "pushed": pushed}


def test_the_operator_prepares_on_the_server_a_retry_produces_nothing_and_the_same_input_is_skipped(
    connections, kafka_broker, tmp_path, unique_name
):
    from airflow.sdk.exceptions import AirflowSkipException

    pipeline, topic = unique_name("connect-op"), unique_name("out")
    operator = _operator(tmp_path, pipeline, topic, "op", input_id="batch-1")
    first = _context("run-1", 1)
    uri = operator.execute(first)
    assert first["pushed"]["checkpoint"]["outcome"] == "prepared"
    assert read_manifest(uri).status is ManifestStatus.PREPARED
    assert read_manifest(uri).prepared_by.run_id == "run-1"
    assert count_keys(kafka_broker.bootstrap, topic) == {}
    assert operator._config_file is None  # the private file is gone after the run

    retry = _operator(tmp_path, pipeline, topic, "op", input_id="batch-1")
    assert retry.execute(_context("run-1", 2)) == uri  # the same run's next try: the same checkpoint
    with TransactionAdmin(KafkaClientConfig.from_mapping(kafka_broker.client_config())) as admin:
        commit_checkpoint(admin, uri, committed_by="test")

    later = _operator(tmp_path, pipeline, topic, "op", input_id="batch-1")  # another run, the same input
    with pytest.raises(AirflowSkipException, match="batch-1"):
        later.execute(_context("run-2", 1, datetime(2026, 11, 29, tzinfo=timezone.utc)))
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [f"op-{i}" for i in range(60)])


def test_runs_join_one_server_session_and_a_closed_one_is_replaced(connections, tmp_path, unique_name):
    """Shared: the second run finds the server's Python workers and the runtime warm. A session the
    server closed (idle timeout; here released by hand) cannot be joined again: the next try runs on
    a new session instead of failing."""
    first, second = (_operator(tmp_path, unique_name("share"), "t", "s")._open_session() for _ in range(2))
    try:
        assert first.client._session_id == second.client._session_id
        own = _operator(tmp_path, unique_name("own"), "t", "s", reuse_session=False)._open_session()
        assert own.client._session_id != first.client._session_id
        own.stop()
        first.client.release_session()  # the server closes the shared session
        replaced = _operator(tmp_path, unique_name("share"), "t", "s")._open_session()
        assert replaced.client._session_id != first.client._session_id
        assert replaced.range(3).count() == 3
        replaced.stop()
    finally:
        for session in (first, second):
            session.release_session_on_close = False
            session.stop()


@pytest.mark.parametrize("setting", [{"conf": {"spark.executor.memory": "2g"}}, {"packages": "a:b:1"},
                                     {"executor_python": "/usr/bin/python3"}])
def test_spark_submit_settings_are_refused_by_name_not_dropped(setting):
    """A Connect server has its own launch settings: given here they could only be ignored."""
    from airflow_provider_kafka_eos.kafka.errors import UsageError

    [name] = setting
    with pytest.raises(UsageError, match=rf"'submit': {name} are spark-submit settings.*SparkEosSubmit"):
        SparkEosConnectOperator(task_id="submit", pipeline_id="p", topic="t",
                                application_callable="m:f", **setting)
    SparkEosConnectOperator(task_id="submit", pipeline_id="p", topic="t", application_callable="m:f")


def test_kafka_input_on_the_server_reads_committed_input_once_and_the_group_moves_with_the_output(
    connections, kafka_broker, tmp_path, unique_name
):
    """The Kafka-input pipeline on Connect: the range planned in the task's process, read on the
    server by Spark's Kafka source (read_committed), the group's offsets in the same vote. Two
    checkpoints: the second reads only what arrived after the first's ``to``; aborted input never."""
    from kafka_input_support import (
        APPLICATION,
        PARTITIONS,
        commit_and_wait,
        produce_round,
        topic_group_offsets,
    )
    from ops_support import create_topic

    pipeline = unique_name("connect-k2k")
    topic_in = create_topic(kafka_broker.bootstrap, unique_name("k2k-in"), PARTITIONS)
    topic_out, group = unique_name("k2k-out"), unique_name("k2k-group")

    def checkpoint(run_id, run_after):
        operator = SparkEosConnectOperator(
            task_id="submit", pipeline_id=pipeline, topic=topic_out,
            manifest_base_uri=str(tmp_path / "store"), application_callable=APPLICATION,
            input_topics=topic_in, input_group=group, input_start="earliest",
            kafka_eos_conn_id="kafka_eos_connect", conn_id="spark_connect_test")
        return operator.execute(_context(run_id, 1, run_after))

    expected = produce_round(kafka_broker.bootstrap, topic_in, "a")
    with TransactionAdmin(KafkaClientConfig.from_mapping(kafka_broker.client_config())) as admin:
        first = commit_and_wait(admin, checkpoint("run-1", datetime(2026, 11, 28, tzinfo=timezone.utc)))
        assert_exactly_once(count_keys(kafka_broker.bootstrap, topic_out), expected)
        expected += produce_round(kafka_broker.bootstrap, topic_in, "b")
        second = commit_and_wait(admin, checkpoint("run-2", datetime(2026, 11, 29, tzinfo=timezone.utc)))
        assert [r.start for r in second.input.kafka.ranges] == [r.end for r in first.input.kafka.ranges]
        assert topic_group_offsets(admin, group, topic_in) == {
            (r.topic, r.partition): r.end for r in second.input.kafka.ranges}
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic_out), expected)
