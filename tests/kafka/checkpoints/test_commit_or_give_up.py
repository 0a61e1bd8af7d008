"""A commit and a give-up of one checkpoint never both act: the decision is in the manifest first.

Regression test of an anomaly the S3 race test found (tests/kafka/checkpoints/test_store_objects_s3.py):
a commit racing ``abort --manifest`` committed one partition's transaction while the give-up aborted the
other's, a torn checkpoint (half the batch visible). Here each interleaving is forced on the local
store: the first decision stands and the other side refuses before touching Kafka. Each test ends
with a read_committed key count.
"""

from __future__ import annotations

import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints import lifecycle
from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import abort_checkpoint, commit_checkpoint
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, read_manifest
from airflow_provider_kafka_eos.kafka.checkpoints.store import prepared_index
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import DataLossError, KafkaEosError
from kafka_eos_testing.transactions import produce_transaction, write_prepared_manifest
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.broker]


@pytest.fixture
def prepared(kafka_broker, tmp_path, unique_name):
    prefix, topic = unique_name("decide"), unique_name("decide-topic")
    ids, keys = [f"{prefix}-{p}-3" for p in range(2)], []
    for p, tid in enumerate(ids):
        batch = [f"k{p}-{i}".encode() for i in range(4)]
        keys += batch
        produce_transaction(kafka_broker.bootstrap, tid, topic, batch, transaction_timeout_ms=600_000)
    admin = TransactionAdmin(KafkaClientConfig.from_mapping({"bootstrap.servers": kafka_broker.bootstrap}))
    uri = write_prepared_manifest(admin, tmp_path.as_uri(), prefix, topic, ids, checkpoint_id=3,
                                  prefix=prefix)
    yield {"admin": admin, "uri": uri, "topic": topic, "keys": keys, "ids": ids}
    admin.close()


def _states(admin, ids):
    return {t: str(getattr(d.state, "value", d.state)) for t, d in admin.describe(ids).items()}


def test_a_give_up_after_a_commit_decided_refuses_and_aborts_nothing(kafka_broker, prepared):
    admin, uri = prepared["admin"], prepared["uri"]
    lifecycle._decide(uri, "commit", "worker-1", lambda: 1_000)  # a commit has started (and stalled)
    with pytest.raises(KafkaEosError, match=r"being committed \(worker-1 decided.*nothing was aborted"):
        abort_checkpoint(admin, uri, aborted_by="operator")
    assert set(_states(admin, prepared["ids"]).values()) == {"Ongoing"}
    assert read_manifest(uri).status is ManifestStatus.PREPARED
    assert commit_checkpoint(admin, uri, committed_by="worker-1").status == "committed"  # it finishes
    assert_exactly_once(count_keys(kafka_broker.bootstrap, prepared["topic"]), prepared["keys"])


def test_a_commit_after_a_give_up_decided_refuses_and_the_resumed_give_up_finishes(kafka_broker, prepared):
    admin, uri = prepared["admin"], prepared["uri"]
    lifecycle._decide(uri, "abort", "operator", lambda: 1_000)  # the give-up stopped before aborting
    with pytest.raises(DataLossError, match=r"was given up by operator at .* nothing was committed"):
        commit_checkpoint(admin, uri, committed_by="worker-1")
    assert set(_states(admin, prepared["ids"]).values()) == {"Ongoing"}  # nothing was sent
    assert prepared_index([(uri, read_manifest(uri))]) == {}  # no longer protected: the abort may finish
    assert abort_checkpoint(admin, uri, aborted_by="operator").status == "aborted"
    assert read_manifest(uri).status is ManifestStatus.ABORTED
    assert count_keys(kafka_broker.bootstrap, prepared["topic"]) == {}
