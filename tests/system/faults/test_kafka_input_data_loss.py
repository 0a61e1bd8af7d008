"""Input that leaves Kafka between the plan and the read: Spark's data-loss error, named as ours.

The checkpoint plans its range (stored before anything is read), then DeleteRecords moves the log
start of one input partition into the planned range, as retention would. The job reads the stored
plan with Spark's Kafka source (``failOnDataLoss=true``), which stops with its own
``KAFKA_DATA_LOSS`` error; the job reports ``InputRangeLostError`` naming the partition and the
planned range and the runbook page, and nothing is committed: no manifest, the group's offsets
unmoved, a read_committed count of the output empty.

Not ``provider_logic``: what is proven is what Kafka 4.4's DeleteRecords and Spark's reader do, so the
apache pass runs it (one spark-submit). The embedded broker lacks DeleteRecords: skipped there.
"""

from __future__ import annotations

import pytest
from kafka.structs import TopicPartition as KafkaTopicPartition
from kafka_input_job_helpers import Job, create_topic
from kafka_input_support import PARTITIONS, connector_jars, produce_round, settled_group_offsets

from airflow_provider_kafka_eos.kafka.admin.input_offsets import read_input_offsets
from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.input_ranges import plan_uri
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import find_manifests
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.spark.handoff import EXIT_KAFKA
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.faults, pytest.mark.spark, pytest.mark.broker]


def test_a_range_deleted_after_the_plan_fails_the_read_by_name_and_commits_nothing(
        kafka_broker, tmp_path, unique_name):
    if kafka_broker.embedded:
        pytest.skip("needs DeleteRecords (moving a partition's log start offset into the planned range), "
                    "which the embedded broker does not implement")
    jars = connector_jars()  # fetched (Maven, once) only where the test runs
    bootstrap = kafka_broker.bootstrap
    topic_in = create_topic(bootstrap, unique_name("k2k-loss-in"), PARTITIONS)
    topic_out = create_topic(bootstrap, unique_name("k2k-loss-out"), 1)
    group = unique_name("k2k-loss-group")
    job = Job(kafka_broker, tmp_path, unique_name("k2k-loss"), topic_in, topic_out, group, jars)
    produce_round(bootstrap, topic_in, "a")
    with TransactionAdmin(KafkaClientConfig.from_mapping(kafka_broker.client_config())) as admin:
        plan = job.plan(1)  # the driver plans and stores the range, then (say) waits for executors
        planned = plan.range_of(topic_in, 0)
        cut = (planned.start + planned.end) // 2
        assert planned.start < cut < planned.end
        admin.wire.admin.delete_records({KafkaTopicPartition(topic_in, 0): cut})
        assert read_input_offsets(admin, [topic_in]).earliest[(topic_in, 0)] == cut

        result = job.run(1)
        assert result.returncode == EXIT_KAFKA, result.stderr[-3000:]
        output = result.stdout + result.stderr  # spark-submit relays the Python driver's stderr on stdout
        error = output[output.rfind("kafka-eos job: checkpoint 1 of"):].splitlines()[0]
        assert f"{topic_in}-0 [{planned.start}, {planned.end})" in error, output[-3000:]
        assert "input Kafka no longer has part of the planned range" in error
        assert plan_uri(str(tmp_path / "manifests"), job.prefix, 1) in error
        assert "lost-input-ranges" in error
        assert find_manifests(str(tmp_path / "manifests"), job.prefix) == []  # no vote
        # Nothing ever committed a group on this fresh node: its first lookup waits for __consumer_offsets.
        assert settled_group_offsets(admin, group, topic_in) == {}
    assert_exactly_once(count_keys(bootstrap, topic_out), [])  # nothing committed
