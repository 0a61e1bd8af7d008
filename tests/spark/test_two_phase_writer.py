"""write_exactly_once with KIP-939 two-phase commit (the Arrow producer) in local Spark.

A checkpoint prepared with ``two_phase_commit=True`` is still open on the coordinator after
three times its transaction timeout, then commits: every key exactly once. (The same sequence
without 2PC ends in DataLossError: ``tests/kafka/producers/test_arrow_producer.py``, which needs no Spark.)
"""

from __future__ import annotations

import time

import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import manifest_uri, read_manifest
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import UsageError
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import TxnState
from airflow_provider_kafka_eos.spark.job import build_arg_parser
from airflow_provider_kafka_eos.spark.writer import write_exactly_once
from kafka_eos_testing.spark import commit_manifest, keyed_frame
from kafka_eos_testing.transactions import wait_until_committed
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def test_two_phase_checkpoint_outlives_three_timeouts_then_commits(spark, kafka_broker_factory, tmp_path,
                                                                   unique_name):
    broker = kafka_broker_factory(two_phase_commit=True, abort_check_interval_ms=50)
    topic, prefix = unique_name("out2pc"), unique_name("pipe2pc")
    timeout_ms = 2000
    df = keyed_frame(spark, "k", 400, 3)
    manifest = write_exactly_once(
        df, topic=topic, kafka_config=broker.client_config(), transactional_id_prefix=prefix,
        checkpoint_id=1, manifest_base_uri=str(tmp_path), transaction_timeout_ms=timeout_ms,
        two_phase_commit=True,
    )
    assert manifest.committables and all(c.two_phase for c in manifest.committables)
    stored = read_manifest(manifest_uri(str(tmp_path), prefix, 1))
    assert all(c.two_phase for c in stored.committables)  # the manifest records it
    ids = [c.transactional_id for c in manifest.committables]
    config = KafkaClientConfig.from_mapping(broker.client_config())
    with TransactionAdmin(config) as admin:
        started = min(c.transaction_start_ms for c in manifest.committables) / 1000
        while time.time() - started < 3 * timeout_ms / 1000:
            states = {d.state for d in admin.describe(ids).values()}
            assert states == {TxnState.ONGOING}, states
            time.sleep(0.2)  # sampling the state while the timeout passes three times over
    assert count_keys(broker.bootstrap, topic) == {}  # prepared, not visible
    assert {o.outcome for o in commit_manifest(broker.client_config(), manifest)} == {"committed"}
    with TransactionAdmin(config) as admin:
        wait_until_committed(admin, ids)
    assert_exactly_once(count_keys(broker.bootstrap, topic), [f"k-{i}".encode() for i in range(400)])


def test_two_phase_commit_needs_the_arrow_producer(tmp_path):
    with pytest.raises(UsageError, match="producer='arrow'"):
        write_exactly_once(
            None, topic="t", kafka_config={"bootstrap.servers": "127.0.0.1:1"}, transactional_id_prefix="p",
            checkpoint_id=1, manifest_base_uri=str(tmp_path), two_phase_commit=True, producer="librdkafka",
        )
    with pytest.raises(UsageError, match="producer must be one of"):
        write_exactly_once(
            None, topic="t", kafka_config={"bootstrap.servers": "127.0.0.1:1"}, transactional_id_prefix="p",
            checkpoint_id=1, manifest_base_uri=str(tmp_path), producer="java",
        )
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_job_takes_the_switches():
    base = ["--pipeline-id", "p", "--topic", "t", "--transactional-id-prefix", "p", "--checkpoint-id", "1",
            "--manifest-base-uri", "/tmp/m", "--application", "m:f"]
    args = build_arg_parser().parse_args([*base, "--two-phase-commit", "--producer", "arrow"])
    assert args.two_phase_commit and args.producer == "arrow"
    args = build_arg_parser().parse_args(base)
    assert not args.two_phase_commit and args.producer is None
