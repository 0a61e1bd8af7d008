"""The commit task of a job started by any runner (issue #37): it finds the checkpoint by pipeline id
and input id in the manifest store (the input's claim), and says by name when there is nothing to
commit. The store is a real local folder; no Kafka is reached on these paths (the manifest is
missing, so nothing is committed). The full path runs in tests/system/dags/test_byo_runner_dag.py.
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.identity import RunIdentity
from airflow_provider_kafka_eos.kafka.checkpoints.input_claims import InputVerdict, claim_input
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
from airflow_provider_kafka_eos.kafka.errors import ManifestError, UsageError
from airflow_provider_kafka_eos.operators.commit import KafkaCommitTransactionsOperator

pytestmark = pytest.mark.dag


@pytest.fixture
def store(monkeypatch, tmp_path):
    base = (tmp_path / "manifests").as_uri()
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_EOS_BYO", json.dumps(
        {"conn_type": "kafka_eos", "extra": {"bootstrap.servers": "127.0.0.1:9", "manifest_base_uri": base}}))
    return ManifestStore.configured(base)


def _commit(**kwargs):
    return KafkaCommitTransactionsOperator(task_id="commit", kafka_eos_conn_id="kafka_eos_byo", **kwargs)


def _fails(operator, match: str) -> None:
    """A ManifestError, not fail-now: the task's retry finds the checkpoint once the job prepared it."""
    with pytest.raises(ManifestError, match=match):
        operator.execute({})


def test_no_claim_for_the_input_is_nothing_to_commit_named(store):
    _fails(_commit(pipeline_id="orders", input_id="2026-03-01"),
           "pipeline 'orders': no checkpoint holds input '2026-03-01' .* run the job")


def test_a_claim_whose_job_prepared_nothing_yet_is_named_with_its_run(store):
    run = RunIdentity("byo", "manual__1", 1)
    outcome = claim_input(store, pipeline_id="orders", input_id="2026-03-01", checkpoint_id=42, run=run)
    assert outcome.verdict is InputVerdict.WRITE
    _fails(_commit(pipeline_id="orders", input_id="2026-03-01"),
           "claimed by run 'manual__1' of DAG 'byo' .* for checkpoint 42, but .*checkpoint-0+42.json "
           "does not exist")


def test_pipeline_id_and_input_id_go_together():
    with pytest.raises(UsageError, match="pipeline_id and input_id go together"):
        _commit(input_id="2026-03-01")
