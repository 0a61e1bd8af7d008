"""The exactly-once scenarios of ``write_exactly_once`` on Spark Connect (no SparkContext, no RDD).

One local Spark Connect server for the whole run (``spark_connect_server``, started from the pip
PySpark distribution) and the embedded broker: the same writer as classic Spark, its runtime shipped
with ``addArtifacts``. Prepare -> commit -> rerun -> re-trigger, a task killed mid-write, a failed job
then its retry, and a give-up; every test ends with a read_committed key count.
"""

from __future__ import annotations

import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import abort_checkpoint, commit_checkpoint
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, read_manifest
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.spark import sessions
from airflow_provider_kafka_eos.spark.faults import FaultPlan
from airflow_provider_kafka_eos.spark.writer import write_exactly_once
from kafka_eos_testing.spark import keyed_frame
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def _write(df, broker, base, prefix, topic, checkpoint, **kwargs):
    return write_exactly_once(df, topic=topic, kafka_config=broker.client_config(),
                              transactional_id_prefix=prefix, checkpoint_id=checkpoint,
                              manifest_base_uri=str(base), **kwargs)


def _keys(tag, n):
    return [f"{tag}-{i}" for i in range(n)]


def _admin(broker):
    return TransactionAdmin(KafkaClientConfig.from_mapping(broker.client_config()))


def test_prepare_commit_rerun_and_retrigger_write_each_record_once(
    spark_connect, spark_connect_server, kafka_broker, tmp_path, unique_name
):
    # Connect for real: no SparkContext; the partition count comes from the DataFrame API. (Here,
    # not in a test of its own: a test without the broker would start the server in a second pass.)
    assert sessions.is_connect(spark_connect)
    with pytest.raises(Exception, match=r"JVM_ATTRIBUTE_NOT_SUPPORTED|sparkContext"):
        spark_connect.sparkContext  # noqa: B018 (the attribute access is what raises)
    assert sessions.partition_count(keyed_frame(spark_connect, "n", 10, 3)) == 3
    prefix, topic = unique_name("connect"), unique_name("out")
    df = keyed_frame(spark_connect, "a", 200, 2)
    manifest = _write(df, kafka_broker, tmp_path, prefix, topic, 1)
    assert read_manifest(manifest.uri).status is ManifestStatus.PREPARED
    assert {c.transactional_id for c in manifest.committables} == {f"{prefix}-{p}-1" for p in range(2)}
    assert count_keys(kafka_broker.bootstrap, topic) == {}  # prepared: nothing visible yet

    assert _write(df, kafka_broker, tmp_path, prefix, topic, 1).committables == manifest.committables  # retry
    with _admin(kafka_broker) as admin:
        assert commit_checkpoint(admin, manifest.uri, committed_by="test").status == "committed"
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys("a", 200))

    # A re-trigger of the same checkpoint from a new client session (a new run): nothing produced.
    other = spark_connect_server.session()
    try:
        again = _write(keyed_frame(other, "a", 200, 2), kafka_broker, tmp_path, prefix, topic, 1)
    finally:
        other.stop()
    assert again.status is ManifestStatus.COMMITTED
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys("a", 200))


def test_a_task_killed_mid_write_is_fenced_by_its_retry(spark_connect, kafka_broker, tmp_path, unique_name):
    """The partition-0 task's Python worker dies after 30 of its records reached the broker; the
    server retries the task, whose producer fences the dead attempt's open transaction."""
    prefix, topic = unique_name("connect-kill"), unique_name("out")
    manifest = _write(keyed_frame(spark_connect, "k", 120, 2), kafka_broker, tmp_path, prefix, topic, 4,
                      fault_plan=FaultPlan(kill_task_after_records=30))
    assert len(manifest.committables) == 2
    with _admin(kafka_broker) as admin:
        commit_checkpoint(admin, manifest.uri, committed_by="test")
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys("k", 120))
    # The dead attempt's 30 records are in the log, aborted: the kill happened and was fenced.
    assert sum(count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted").values()) == 150


def test_a_failed_job_leaves_no_manifest_and_its_rerun_restores(spark_connect, kafka_broker, tmp_path,
                                                                unique_name):
    prefix, topic = unique_name("connect-fail"), unique_name("out")
    df = keyed_frame(spark_connect, "f", 80, 2)
    with pytest.raises(Exception, match="injected failure of partition 1"):
        _write(df, kafka_broker, tmp_path, prefix, topic, 7, fault_plan=FaultPlan(fail_task_partition=1))
    assert not list(tmp_path.rglob("checkpoint-7.json"))
    manifest = _write(df, kafka_broker, tmp_path, prefix, topic, 7)  # the rerun aborts what was left
    with _admin(kafka_broker) as admin:
        commit_checkpoint(admin, manifest.uri, committed_by="test")
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys("f", 80))


def test_a_give_up_leaves_nothing_visible(spark_connect, kafka_broker, tmp_path, unique_name):
    prefix, topic = unique_name("connect-giveup"), unique_name("out")
    manifest = _write(keyed_frame(spark_connect, "g", 50, 2), kafka_broker, tmp_path, prefix, topic, 9)
    with _admin(kafka_broker) as admin:
        abort_checkpoint(admin, manifest.uri, aborted_by="test")
    assert read_manifest(manifest.uri).status is ManifestStatus.ABORTED
    assert count_keys(kafka_broker.bootstrap, topic) == {}
    assert sum(count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted").values()) == 50
