"""The transaction deadline's verdict (``kafka/operations/prepared_deadline.py``): pure, no broker.

Which checkpoints a missed pipeline deadline names, in which order, with which runbook page; and
that nothing PREPARED (committed, aborted, being given up) raises no alarm.
"""

from __future__ import annotations

from airflow_provider_kafka_eos.kafka.checkpoints.identity import RunIdentity
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import Decision, Manifest, ManifestStatus
from airflow_provider_kafka_eos.kafka.operations.prepared_deadline import judge_prepared
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, TopicPartition

NOW = 1_800_000_000_000


def _manifest(checkpoint_id: int, status: ManifestStatus, *, starts: tuple[int, ...],
              timeout_ms: int = 60_000, run_id: str | None = "manual__a",
              decision: Decision | None = None) -> Manifest:
    committables = [
        Committable(transactional_id=f"p-{i}-{checkpoint_id}", producer_id=10 + i, producer_epoch=0,
                    partitions=(TopicPartition("out", i),), record_count=5, prepared_at_ms=start + 100,
                    transaction_start_ms=start, transaction_timeout_ms=timeout_ms, transaction_version=2,
                    end_txn_version=5)
        for i, start in enumerate(starts)
    ]
    manifest = Manifest(pipeline_id="p", checkpoint_id=checkpoint_id, transactional_id_prefix="p",
                        naming_strategy="INCREMENTING", topic="out", status=status, committables=committables,
                        created_at_ms=NOW - 1000, updated_at_ms=NOW - 1000,
                        prepared_by=RunIdentity("eos_pipeline", run_id, 1) if run_id else None,
                        decision=decision)
    manifest.uri = f"file:///store/p/checkpoint-{checkpoint_id:012d}.json"
    return manifest


def test_a_prepared_checkpoint_is_named_with_its_age_time_left_and_the_commit_page():
    # two transactions: the one that started first is the one the broker aborts first
    prepared = _manifest(7, ManifestStatus.PREPARED, starts=(NOW - 20_000, NOW - 35_000))
    verdict = judge_prepared([prepared], pipeline_id="p", run_id="manual__a", now_ms=NOW)
    assert verdict.at_risk and verdict.pages == ("commit-pending-transaction",)
    [checkpoint] = verdict.prepared
    assert (checkpoint.checkpoint_id, checkpoint.this_run, checkpoint.transactions) == (7, True, 2)
    assert (checkpoint.open_ms, checkpoint.left_ms, checkpoint.timeout_ms) == (35_000, 25_000, 60_000)
    text = verdict.message("0.5 of the 60 s transaction timeout after it was queued")
    assert "pipeline 'p': run 'manual__a' passed its deadline (0.5 of the 60 s" in text
    assert "checkpoint 7 (this run, 2 transaction(s)) is PREPARED and not committed, open 35 s of its 60 s " \
           "transaction timeout (58 %)" in text
    assert "(in 25 s)" in text
    assert "kafka-eos-txn commit --manifest file:///store/p/checkpoint-000000000007.json" in text
    assert "kafka-eos-txn runbook commit-pending-transaction" in text


def test_this_runs_checkpoint_comes_first_and_one_past_its_deadline_names_the_data_loss_page():
    older = _manifest(3, ManifestStatus.PREPARED, starts=(NOW - 70_000,), run_id="scheduled__old")
    mine = _manifest(9, ManifestStatus.PREPARED, starts=(NOW - 5_000,))
    verdict = judge_prepared([older, mine], pipeline_id="p", run_id="manual__a", now_ms=NOW)
    assert [c.checkpoint_id for c in verdict.prepared] == [9, 3]
    assert verdict.pages == ("commit-pending-transaction", "data-loss")
    text = verdict.message("x")
    assert "checkpoint 3 (run 'scheduled__old', 1 transaction(s)) is still PREPARED but past its " \
           "transaction deadline" in text and "kafka-eos-txn runbook data-loss" in text


def test_committed_aborted_and_given_up_checkpoints_raise_no_alarm():
    manifests = [
        _manifest(1, ManifestStatus.COMMITTED, starts=(NOW - 50_000,)),
        _manifest(2, ManifestStatus.ABORTED, starts=(NOW - 50_000,)),
        _manifest(3, ManifestStatus.PREPARED, starts=(NOW - 50_000,),
                  decision=Decision("abort", "ops", NOW)),
    ]
    verdict = judge_prepared(manifests, pipeline_id="p", run_id="manual__a", now_ms=NOW)
    assert not verdict.at_risk and verdict.pages == () and verdict.given_up == (3,)
    text = verdict.message("0.5 of the 60 s transaction timeout after it was queued")
    assert "no checkpoint of the pipeline is PREPARED: nothing is at risk yet, the run is slow" in text
    assert "checkpoint(s) 3 are being given up" in text
