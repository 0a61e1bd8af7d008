"""The writer lease: one writer per pipeline from restore's listing to the vote.

Pure store logic on a local manifest store; the clock and the sleep are handed in where a test must
not wait for real time. What the lease protects (another run's open transactions from restore) is
shown with Spark and a broker in tests/spark/test_overlapping_writers.py.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.abort_plan import AbortCandidate, AbortPolicy, plan_abort
from airflow_provider_kafka_eos.kafka.checkpoints.identity import RunIdentity
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
from airflow_provider_kafka_eos.kafka.checkpoints.writer_lease import (
    lease_uri,
    live_writers,
    load_writing,
    read_lease,
    writer_lease,
)
from airflow_provider_kafka_eos.kafka.errors import ManifestError, ManifestStoreError, PipelineBusyError

RUN_A = RunIdentity(dag_id="eos_pipeline", run_id="scheduled__a")
RUN_B = RunIdentity(dag_id="eos_pipeline", run_id="backfill__b")


class FakeTime:
    """A monotonic clock that only moves when the writer sleeps; each sleep may run a step."""

    def __init__(self, on_sleep=None):
        self.now, self.slept, self.on_sleep = 0.0, [], on_sleep

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            self.on_sleep(len(self.slept))


@pytest.fixture
def store(tmp_path):
    store = ManifestStore.configured(str(tmp_path / "manifests"))
    store.create()
    return store


def _lease(store, checkpoint, holder, pipeline="pipe", prefix=None, **options):
    return writer_lease(store, pipeline_id=pipeline, transactional_id_prefix=prefix or pipeline,
                        checkpoint_id=checkpoint, holder=holder, **options)


def _path(store, pipeline="pipe"):
    return pathlib.Path(lease_uri(store, pipeline))


def test_a_writer_takes_the_lease_and_gives_it_back(store):
    with _lease(store, 7, RUN_A) as held:
        stored = read_lease(store, "pipe")
        assert stored == held.lease
        assert (stored.checkpoint_id, stored.holder) == (7, RUN_A)
        assert stored.live(stored.taken_at_ms)
        held.confirm()  # still ours: the vote may be written
    released = read_lease(store, "pipe")
    assert released.token == held.lease.token and not released.live(released.taken_at_ms)


def test_a_second_writer_of_another_checkpoint_waits_then_refuses_and_changes_nothing(store):
    time_ = FakeTime()
    with _lease(store, 7, RUN_A) as held:
        before = _path(store).read_bytes()
        with pytest.raises(PipelineBusyError) as caught, \
                _lease(store, 3, RUN_B, wait_s=10, poll_s=2, clock=time_.clock, sleep=time_.sleep):
            pytest.fail("the second writer must not get the lease")
        assert _path(store).read_bytes() == before
        held.confirm()
    message = str(caught.value)
    assert "checkpoint 3 cannot start" in message and "scheduled__a" in message and "checkpoint 7" in message
    assert "max_active_runs=1" in message and caught.value.runbook == "overlapping-runs"
    assert sum(time_.slept) == pytest.approx(10)


def test_a_waiting_writer_gets_the_lease_once_the_holder_votes(store):
    """The backfill beside the schedule: it queues, then writes after the other run's vote."""
    holder = _lease(store, 7, RUN_A)
    held_a = holder.__enter__()
    time_ = FakeTime(on_sleep=lambda n: n == 3 and holder.__exit__(None, None, None))
    with _lease(store, 3, RUN_B, wait_s=60, clock=time_.clock, sleep=time_.sleep) as held_b:
        assert read_lease(store, "pipe").holder == RUN_B
        held_b.confirm()
    assert len(time_.slept) == 3
    assert held_a.lease.checkpoint_id == 7


def test_a_retry_of_the_same_checkpoint_takes_the_lease_over_and_the_earlier_attempt_cannot_vote(store):
    earlier = _lease(store, 7, RUN_A)
    held_a = earlier.__enter__()
    with _lease(store, 7, RUN_A, wait_s=0) as held_b:
        with pytest.raises(PipelineBusyError, match=r"checkpoint 7 lost its writer lease .* no manifest was"):
            held_a.confirm()
        held_b.confirm()
    earlier.__exit__(None, None, None)  # the stale attempt's release does not touch the new holder's object
    assert read_lease(store, "pipe").token == held_b.lease.token


def test_an_expired_lease_of_a_dead_writer_is_taken_over(store):
    dead = {"schema_version": 1, "pipeline_id": "pipe", "transactional_id_prefix": "pipe", "checkpoint_id": 5,
            "holder": RUN_A.to_dict(),
            "host": "gone", "pid": 1, "token": "dead", "taken_at_ms": 1, "expires_at_ms": 2}
    _path(store).parent.mkdir(parents=True, exist_ok=True)
    _path(store).write_text(json.dumps(dead))
    with _lease(store, 6, RUN_B, wait_s=0) as held:
        assert read_lease(store, "pipe").token == held.lease.token


def test_the_lease_is_renewed_by_confirm(store):
    with _lease(store, 7, RUN_A, ttl_s=30) as held:
        first = read_lease(store, "pipe").expires_at_ms
        _path(store).write_text(_path(store).read_text().replace(str(first), str(first - 20_000)))
        held.confirm()
        assert read_lease(store, "pipe").expires_at_ms >= first


def test_pipelines_hold_their_own_leases(store):
    with _lease(store, 7, RUN_A), _lease(store, 7, RUN_B, pipeline="other", wait_s=0) as held:
        assert read_lease(store, "other").token == held.lease.token


def test_a_malformed_lease_is_refused_by_name(store):
    _path(store).parent.mkdir(parents=True, exist_ok=True)
    _path(store).write_text("{not json")
    with pytest.raises(ManifestError, match=r"writer lease .*_writer.json is malformed.*delete"), \
            _lease(store, 7, RUN_A, wait_s=0):
        pytest.fail("no writer may start")
    assert _path(store).read_text() == "{not json"


def test_an_unreachable_store_writes_nothing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    store = ManifestStore.configured(str(blocker))
    with pytest.raises(ManifestStoreError, match=r"manifest store .*/file .* cannot be read: FileExists"), \
            _lease(store, 7, RUN_A, wait_s=0):
        pytest.fail("no writer may start")
    assert blocker.read_text() == "not a folder"


def test_live_writers_name_the_prefixes_being_written_and_nothing_else(store):
    dead = {"schema_version": 1, "pipeline_id": "old", "transactional_id_prefix": "old-p", "checkpoint_id": 5,
            "holder": None, "host": "gone", "pid": 1, "token": "dead", "taken_at_ms": 1, "expires_at_ms": 2}
    _path(store, "old").parent.mkdir(parents=True, exist_ok=True)
    _path(store, "old").write_text(json.dumps(dead))
    with _lease(store, 7, RUN_A, prefix="pipe-p"):
        assert {p: lease.checkpoint_id for p, lease in live_writers(store).items()} == {"pipe-p": 7}
        writing = load_writing(store.base_uri)
        assert list(writing) == ["pipe-p"] and "scheduled__a" in writing["pipe-p"]
        assert load_writing(store.base_uri, protect=False) == {}  # the explicit unprotected abort
    assert live_writers(store) == {}


def test_an_abort_from_outside_leaves_a_writing_prefix_alone_unless_unprotected():
    candidates = [AbortCandidate(t, "Ongoing", 1, 0, age_ms=10**7)
                  for t in ("pipe-p-0-7", "pipe-p-offsets", "pipe-p2-0-7", "other-0-1")]
    writing = {"pipe-p": "run 'scheduled__a' of DAG 'eos_pipeline', checkpoint 7"}
    plan = plan_abort(candidates, prepared={}, policy=AbortPolicy(prefixes=None, writing=writing))
    assert plan.to_abort == ["pipe-p2-0-7", "other-0-1"]
    assert all("its pipeline is being written by run 'scheduled__a'" in v.reason for v in plan.refused)
    unprotected = plan_abort(candidates, prepared={},
                             policy=AbortPolicy(prefixes=None, writing=writing, protect=False))
    assert len(unprotected.to_abort) == 4


def test_a_lease_that_cannot_be_read_writes_nothing(store):
    _path(store).mkdir(parents=True)  # a folder where the lease object belongs
    with pytest.raises(ManifestStoreError, match=r"writer lease .*_writer.json cannot be read or written"), \
            _lease(store, 7, RUN_A, wait_s=0):
        pytest.fail("no writer may start")
    assert _path(store).is_dir() and not list(_path(store).iterdir())


def test_renewals_of_one_holder_at_the_same_moment_are_not_a_takeover(store):
    """The renewal thread, confirm() and release() of one holder swap the object one at a time: a
    swap that lost to its own holder's other swap must not read its own token as "taken over"."""
    import threading

    with _lease(store, 7, RUN_A) as held:
        start, failures = threading.Barrier(6), []

        def confirm_many():
            start.wait(timeout=30)
            for _ in range(10):
                try:
                    held.confirm()
                except PipelineBusyError as exc:
                    failures.append(str(exc))

        threads = [threading.Thread(target=confirm_many) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert failures == []
        assert read_lease(store, "pipe").token == held.lease.token
