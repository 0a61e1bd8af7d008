"""``write_exactly_once`` on a Spark Connect session (no SparkContext, no RDD): what the conformance
suite does not run there.

One local Spark Connect server for the whole run (``spark_connect_server``, started from the pip
PySpark distribution) and the embedded broker: the same writer as classic Spark, its runtime shipped
with ``addArtifacts``. The exactly-once scenarios every target passes (prepare, a task killed
mid-write, the driver killed after the manifest, commit, rerun, re-trigger, give-up) run on this
server in tests/system/conformance/test_conformance.py; here, in this process's client session, a
failed job and its retry, ending with a read_committed key count.
"""

from __future__ import annotations

import os
import sys

import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.spark import sessions, shipping
from airflow_provider_kafka_eos.spark.faults import FaultPlan
from airflow_provider_kafka_eos.spark.writer import write_exactly_once
from kafka_eos_testing.spark import keyed_frame
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def _write(df, broker, base, prefix, topic, checkpoint, **kwargs):
    return write_exactly_once(df, topic=topic, kafka_config=broker.client_config(),
                              transactional_id_prefix=prefix, checkpoint_id=checkpoint,
                              manifest_base_uri=str(base), **kwargs)


def test_a_failed_job_leaves_no_manifest_and_its_rerun_restores(spark_connect, kafka_broker, tmp_path,
                                                                unique_name):
    # Connect for real: no SparkContext; the partition count comes from the DataFrame API. (Here,
    # not in a test of its own: a test without the broker would start the server in a second pass.)
    assert sessions.is_connect(spark_connect)
    with pytest.raises(Exception, match=r"JVM_ATTRIBUTE_NOT_SUPPORTED|sparkContext"):
        spark_connect.sparkContext  # noqa: B018 (the attribute access is what raises)
    assert sessions.partition_count(keyed_frame(spark_connect, "n", 10, 3)) == 3
    prefix, topic = unique_name("connect-fail"), unique_name("out")
    df = keyed_frame(spark_connect, "f", 80, 2)
    with pytest.raises(Exception, match="injected failure of partition 1"):
        _write(df, kafka_broker, tmp_path, prefix, topic, 7, fault_plan=FaultPlan(fail_task_partition=1))
    assert not list(tmp_path.rglob("checkpoint-7.json"))
    manifest = _write(df, kafka_broker, tmp_path, prefix, topic, 7)  # the rerun aborts what was left
    with TransactionAdmin(KafkaClientConfig.from_mapping(kafka_broker.client_config())) as admin:
        commit_checkpoint(admin, manifest.uri, committed_by="test")
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [f"f-{i}" for i in range(80)])
    # The write shipped the runtime zip as an artifact; the client's sys.path keeps the installed provider
    # (Connect's addArtifacts put the zip there, ahead of it: spark/shipping.py).
    zip_name = shipping.runtime_zip().name
    assert [entry for entry in sys.path if os.path.basename(entry) == zip_name] == []
