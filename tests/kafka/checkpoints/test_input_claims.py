"""The input claim: one checkpoint per input identity, decided before anything is written.

Pure store logic on a local manifest store (no Kafka: what is written to Kafka is decided here,
and the end-to-end tests in tests/system/dags/test_duplicate_input.py and the real-scheduler test count
the records). The clock and the sleep are handed in where a test must not wait for real time.
"""

from __future__ import annotations

import json
import pathlib
import threading

import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.identity import (
    InputRecord,
    RunIdentity,
)
from airflow_provider_kafka_eos.kafka.checkpoints.input_claims import (
    InputVerdict,
    claim_input,
    claim_uri,
    read_claim,
)
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    Manifest,
    ManifestStatus,
    read_manifest,
    write_manifest,
)
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
from airflow_provider_kafka_eos.kafka.errors import (
    InputBusyError,
    ManifestError,
    ManifestStoreError,
    UsageError,
)
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, TopicPartition
from airflow_provider_kafka_eos.kafka.validation import MAX_INPUT_ID_CHARS

PIPELINE = "orders"
RUN_A = RunIdentity("eos_pipeline", "manual__a", 1, None)
RUN_B = RunIdentity("eos_pipeline", "manual__b", 1, None)


@pytest.fixture
def store(tmp_path) -> ManifestStore:
    return ManifestStore.configured(str(tmp_path / "manifests"))


def _prepare(store: ManifestStore, checkpoint: int, run: RunIdentity, input_id: str,
             status: ManifestStatus = ManifestStatus.PREPARED) -> Manifest:
    """What the job does after a WRITE verdict: a manifest for the claimed checkpoint."""
    manifest = Manifest(
        pipeline_id=PIPELINE, checkpoint_id=checkpoint, transactional_id_prefix=PIPELINE,
        naming_strategy="INCREMENTING", topic="out", status=status,
        committables=[Committable(f"{PIPELINE}-0-{checkpoint}", 7, 0, (TopicPartition("out", 0),), 3, 1, 1,
                                  60_000, 2, 5)],
        created_at_ms=1_770_000_000_000, updated_at_ms=1_770_000_000_000, prepared_by=run,
        input=InputRecord(input_id),
    )
    write_manifest(store.uri(PIPELINE, checkpoint), manifest)
    return manifest


def _claim(store, run, checkpoint, input_id="B1", **kwargs):
    kwargs.setdefault("timeout_s", 0)
    return claim_input(store, pipeline_id=PIPELINE, input_id=input_id, checkpoint_id=checkpoint, run=run,
                       **kwargs)


def test_a_new_input_is_claimed_for_the_runs_checkpoint(store):
    outcome = _claim(store, RUN_A, 100)
    assert (outcome.verdict, outcome.checkpoint_id) == (InputVerdict.WRITE, 100)
    claim = read_claim(store, PIPELINE, "B1")
    assert (claim.checkpoint_id, claim.claimed_by, claim.reprocess_of) == (100, RUN_A, None)
    assert outcome.claim_uri == claim_uri(store, PIPELINE, "B1")
    assert "/orders/_inputs/" in outcome.claim_uri and outcome.claim_uri.endswith(".json")


def test_a_retry_of_the_claiming_run_writes_into_its_claimed_checkpoint(store):
    _claim(store, RUN_A, 100)
    retry = RunIdentity(RUN_A.dag_id, RUN_A.run_id, 2, None)
    outcome = _claim(store, retry, 999)  # e.g. a clear that derives another id: the claim's checkpoint wins
    assert (outcome.verdict, outcome.checkpoint_id) == (InputVerdict.WRITE, 100)


@pytest.mark.parametrize("status", [ManifestStatus.COMMITTED, ManifestStatus.PREPARED])
def test_a_second_run_of_a_written_input_is_a_duplicate_naming_the_run_that_wrote_it(store, status):
    _claim(store, RUN_A, 100)
    _prepare(store, 100, RUN_A, "B1", status)
    before = pathlib.Path(claim_uri(store, PIPELINE, "B1")).read_bytes()
    outcome = _claim(store, RUN_B, 200)
    assert (outcome.verdict, outcome.checkpoint_id) == (InputVerdict.DUPLICATE, 100)
    assert outcome.written_by == RUN_A
    assert "input 'B1' was already written by run 'manual__a' of DAG 'eos_pipeline'" in outcome.message
    assert ("committed at 2026-02-02T02:40:00Z" if status is ManifestStatus.COMMITTED
            else "prepared at 2026-02-02T02:40:00Z") in outcome.message
    assert "nothing written" in outcome.message and "reprocess=True" in outcome.message
    assert pathlib.Path(claim_uri(store, PIPELINE, "B1")).read_bytes() == before  # the claim did not move
    assert not pathlib.Path(store.uri(PIPELINE, 200)).exists()


def test_an_input_whose_checkpoint_was_given_up_is_written_afresh(store):
    _claim(store, RUN_A, 100)
    _prepare(store, 100, RUN_A, "B1", ManifestStatus.ABORTED)
    outcome = _claim(store, RUN_B, 200)
    assert (outcome.verdict, outcome.checkpoint_id) == (InputVerdict.WRITE, 200)
    assert "was given up (ABORTED)" in outcome.message
    claim = read_claim(store, PIPELINE, "B1")
    assert (claim.checkpoint_id, claim.claimed_by) == (200, RUN_B)


def test_reprocess_writes_a_committed_input_again_and_records_what_it_reprocesses(store, caplog):
    _claim(store, RUN_A, 100)
    _prepare(store, 100, RUN_A, "B1", ManifestStatus.COMMITTED)
    with caplog.at_level("WARNING"):
        outcome = _claim(store, RUN_B, 200, reprocess=True)
    assert (outcome.verdict, outcome.checkpoint_id, outcome.reprocess_of) == (InputVerdict.WRITE, 200, 100)
    assert "REPROCESS: input 'B1' was written by checkpoint 100" in caplog.text
    assert read_claim(store, PIPELINE, "B1").reprocess_of == 100
    # Once the reprocess is written, a third run is a duplicate of the reprocess.
    _prepare(store, 200, RUN_B, "B1", ManifestStatus.COMMITTED)
    third = _claim(store, RunIdentity("eos_pipeline", "manual__c", 1, None), 300)
    assert (third.verdict, third.checkpoint_id) == (InputVerdict.DUPLICATE, 200)


def test_reprocess_of_a_still_prepared_input_is_refused_and_changes_nothing(store):
    _claim(store, RUN_A, 100)
    _prepare(store, 100, RUN_A, "B1", ManifestStatus.PREPARED)
    before = pathlib.Path(claim_uri(store, PIPELINE, "B1")).read_bytes()
    with pytest.raises(UsageError, match=r"reprocess of input 'B1' refused: checkpoint 100 .* is PREPARED"):
        _claim(store, RUN_B, 200, reprocess=True)
    assert pathlib.Path(claim_uri(store, PIPELINE, "B1")).read_bytes() == before
    assert read_manifest(store.uri(PIPELINE, 100)).status is ManifestStatus.PREPARED


@pytest.mark.parametrize("active", [True, None])
def test_a_claim_without_a_manifest_whose_run_may_still_run_is_waited_for_then_refused(store, active):
    _claim(store, RUN_A, 100)
    now = [0.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    with pytest.raises(InputBusyError, match=r"claimed by run 'manual__a'.*has not prepared it yet"):
        _claim(store, RUN_B, 200, timeout_s=10, poll_s=2, run_is_active=lambda run: active,
               clock=lambda: now[0], sleep=sleep)
    assert sum(sleeps) == pytest.approx(10) and len(sleeps) == 5  # polled, bounded by the timeout
    assert read_claim(store, PIPELINE, "B1").claimed_by == RUN_A  # never taken over on a guess
    assert not pathlib.Path(store.uri(PIPELINE, 200)).exists()


def test_a_waiting_run_becomes_a_duplicate_once_the_claiming_run_prepares(store):
    _claim(store, RUN_A, 100)
    calls = []

    def sleep(_seconds: float) -> None:  # the claiming run's job writes its manifest meanwhile
        calls.append(1)
        _prepare(store, 100, RUN_A, "B1")

    outcome = _claim(store, RUN_B, 200, timeout_s=60, run_is_active=lambda run: True, sleep=sleep)
    assert (outcome.verdict, outcome.checkpoint_id, len(calls)) == (InputVerdict.DUPLICATE, 100, 1)


def test_a_claim_left_by_a_run_that_stopped_before_preparing_is_taken_over_with_its_checkpoint(store):
    _claim(store, RUN_A, 100)
    asked = []
    outcome = _claim(store, RUN_B, 200, run_is_active=lambda run: asked.append(run) or False)
    assert asked == [RUN_A]
    # The same checkpoint: any straggling attempt of the dead run is fenced by this run's producers.
    assert (outcome.verdict, outcome.checkpoint_id) == (InputVerdict.WRITE, 100)
    assert "took checkpoint 100 over from run 'manual__a'" in outcome.message
    assert read_claim(store, PIPELINE, "B1").claimed_by == RUN_B


def test_runs_of_one_input_started_together_write_it_exactly_once(store):
    """Eight runs race for one input on the real file store; the winner prepares, the rest find it."""
    runs = [RunIdentity("eos_pipeline", f"manual__{i}", 1, None) for i in range(8)]
    start = threading.Barrier(len(runs))
    outcomes: dict[int, object] = {}

    def run(i: int) -> None:
        start.wait(timeout=30)
        outcome = _claim(store, runs[i], 1000 + i, timeout_s=30, poll_s=0.05, run_is_active=lambda r: True)
        if outcome.verdict is InputVerdict.WRITE:
            _prepare(store, outcome.checkpoint_id, runs[i], "B1")
        outcomes[i] = outcome

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(runs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(outcomes) == len(runs)
    writers = [i for i, o in outcomes.items() if o.verdict is InputVerdict.WRITE]
    assert len(writers) == 1, outcomes
    [winner] = writers
    assert all(o.verdict is InputVerdict.DUPLICATE and o.checkpoint_id == 1000 + winner
               for i, o in outcomes.items() if i != winner)
    assert sorted(p.name for p in (pathlib.Path(store.base_uri) / PIPELINE).glob("checkpoint-*.json")) == [
        f"checkpoint-{1000 + winner:012d}.json"]


@pytest.mark.parametrize(
    ("input_id", "message"),
    [
        ("", "input_id is empty"),
        ("   ", "input_id is empty"),
        ("x" * (MAX_INPUT_ID_CHARS + 1), f"more than {MAX_INPUT_ID_CHARS}"),
        ("batch\n2", "control character"),
        (42, "must be a string"),
    ],
)
def test_a_bad_input_identity_is_refused_before_any_write(store, input_id, message):
    with pytest.raises(UsageError, match=message):
        _claim(store, RUN_A, 100, input_id=input_id)
    assert not pathlib.Path(store.base_uri).exists()


def test_an_unreadable_store_fails_the_run_and_never_assumes_a_new_input(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store should be")
    store = ManifestStore.configured(str(blocker / "manifests"))
    with pytest.raises(ManifestStoreError, match=r"claim .* cannot be read or written.*Nothing was written"):
        _claim(store, RUN_A, 100)


def test_a_malformed_claim_is_named_not_ignored(store):
    _claim(store, RUN_A, 100)
    path = pathlib.Path(claim_uri(store, PIPELINE, "B1"))
    path.write_text("{ not json")
    with pytest.raises(ManifestError, match=rf"{path}: input claim is not valid JSON"):
        _claim(store, RUN_B, 200)
    data = {"schema_version": 1, "input_id": "B2", "pipeline_id": PIPELINE, "checkpoint_id": 1,
            "claimed_by": None, "claimed_at_ms": 1, "reprocess_of": None}
    path.write_text(json.dumps(data))
    with pytest.raises(ManifestError, match=r"names input 'B2'.*changed by hand"):
        _claim(store, RUN_B, 200)


def test_the_manifest_records_the_input_and_refuses_a_malformed_one(store):
    manifest = _prepare(store, 100, RUN_A, "B1")
    assert read_manifest(store.uri(PIPELINE, 100)).input == InputRecord("B1") == manifest.input
    data = manifest.to_dict()
    data["input"] = {"id": "", "reprocess_of": None}
    with pytest.raises(ManifestError, match=r"field input.id is empty"):
        Manifest.from_dict(data, source="m.json")
    data["input"] = {"id": "B1", "reprocess_of": "7"}
    with pytest.raises(ManifestError, match=r"input.reprocess_of must be a checkpoint id"):
        Manifest.from_dict(data, source="m.json")
