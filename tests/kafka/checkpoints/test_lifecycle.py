"""kafka/checkpoints/ (store.py, abort_plan.py, lifecycle.py) without a broker: the abort decision
(property-based), the store's refusals, commit-and-mark's truthful report under concurrent
committers, mark-ABORTED.

The admin is a stand-in here (the boundary is the coordinator); every broker path is covered
end to end in tests/cli, tests/sensors, tests/operators and tests/system/dags.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_kafka_eos.kafka.checkpoints.abort_plan import AbortCandidate, AbortPolicy, plan_abort
from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint, mark_aborted
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    Manifest,
    ManifestStatus,
    read_manifest,
    write_manifest,
)
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore, load_prepared, prepared_index
from airflow_provider_kafka_eos.kafka.errors import DataLossError, KafkaEosError, ManifestStoreError
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, TopicPartition
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import TxnOutcome

STATES = ["Ongoing", "Empty", "CompleteCommit", "CompleteAbort", "PrepareCommit", "PrepareAbort"]


def committable(tid: str, pid: int = 1, epoch: int = 0) -> Committable:
    now = int(time.time() * 1000)
    return Committable(
        transactional_id=tid,
        producer_id=pid,
        producer_epoch=epoch,
        partitions=(TopicPartition("t", 0),),
        record_count=2,
        prepared_at_ms=now,
        transaction_start_ms=now,
        transaction_timeout_ms=900_000,
        transaction_version=2,
        end_txn_version=5,
    )


def manifest(status: ManifestStatus, ids: list[str], checkpoint: int = 1) -> Manifest:
    return Manifest("p", checkpoint, "p", "INCREMENTING", "t", status, [committable(t) for t in ids], 1, 1)


# -- the property: protection on, no plan ever holds an id of a PREPARED manifest ----------------

# A small pool shared by open transactions and manifests, so they overlap often; lookalike
# prefixes (a / a2, a-0-1 / a-0-10) stress the ownership rules.
ids = st.sampled_from(["a-0-1", "a-1-1", "a-0-10", "a2-0-1", "b-0-1", "b-1-2", "a-0-2", "x"])
candidates = st.lists(
    st.builds(
        AbortCandidate,
        transactional_id=ids,
        state=st.sampled_from(STATES),
        producer_id=st.integers(0, 3),
        producer_epoch=st.integers(0, 3),
        age_ms=st.one_of(st.none(), st.integers(0, 10_000_000)),
    ),
    max_size=12,
    unique_by=lambda c: c.transactional_id,  # one description per id, as describe() returns
)
manifests = st.lists(
    st.tuples(st.sampled_from(list(ManifestStatus)), st.lists(ids, max_size=4, unique=True)), max_size=5
)
policies = st.builds(
    AbortPolicy,
    protect=st.just(True),
    prefixes=st.one_of(st.none(), st.lists(st.sampled_from(["a", "b-", "", "a-0"]), max_size=3).map(tuple)),
    generated_only=st.booleans(),
    min_age_ms=st.integers(0, 1_000_000),
    expected=st.dictionaries(ids, st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=3),
    abort_foreign=st.booleans(),
    owned_ids=st.frozensets(ids, max_size=3),
)


@settings(max_examples=400, deadline=None)
@given(candidates=candidates, manifests=manifests, policy=policies)
def test_no_abort_plan_with_protection_contains_a_prepared_id(candidates, manifests, policy):
    rows = [
        (f"file:///s/p/checkpoint-{i:012d}.json", manifest(s, m, i)) for i, (s, m) in enumerate(manifests)
    ]
    prepared = prepared_index(rows)
    prepared_ids = {
        c.transactional_id for _, m in rows if m.status is ManifestStatus.PREPARED for c in m.committables
    }
    plan = plan_abort(candidates, prepared=prepared, policy=policy)
    assert not set(plan.to_abort) & prepared_ids
    assert len(plan.verdicts) == len(candidates)  # every candidate gets a verdict with a reason
    assert all(v.reason for v in plan.verdicts)
    assert all(c.state == "Ongoing" for c in candidates if c.transactional_id in plan.to_abort)


def test_unprotected_is_the_only_way_to_abort_a_prepared_id_and_it_says_so():
    prepared = prepared_index([("u", manifest(ManifestStatus.PREPARED, ["p-0-1"]))])
    candidate = AbortCandidate("p-0-1", "Ongoing", 1, 0, 5)
    (refused,) = plan_abort([candidate], prepared=prepared).verdicts
    assert not refused.abort and refused.kind == "commit-pending"
    (forced,) = plan_abort([candidate], prepared=prepared, policy=AbortPolicy(protect=False)).verdicts
    assert forced.abort and forced.reason.startswith("UNPROTECTED")


# -- the store: never "no manifests" ----------------------------------------------------------


def test_store_not_configured_missing_or_unreadable_is_an_error_naming_it(tmp_path):
    with pytest.raises(ManifestStoreError, match="no manifest store is configured"):
        load_prepared(None)
    missing = (tmp_path / "nope").as_uri()
    with pytest.raises(ManifestStoreError, match=f"manifest store {missing} .*does not exist"):
        load_prepared(missing)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o000)
    try:
        import os

        if os.geteuid() != 0:  # root can list anything: only a non-root user sees the refusal
            with pytest.raises(ManifestStoreError, match="cannot be read"):
                load_prepared(locked.as_uri())
    finally:
        locked.chmod(0o755)
    assert load_prepared(missing, protect=False) == {}  # the explicit way around, logged loudly


def test_a_malformed_manifest_in_the_store_raises_rather_than_being_skipped(tmp_path):
    store = ManifestStore.configured(tmp_path.as_uri())
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "checkpoint-000000000001.json").write_text("{not json")
    with pytest.raises(KafkaEosError, match="not valid JSON"):
        store.prepared()


# -- commit-and-mark and mark-ABORTED ---------------------------------------------------------


@dataclass
class RacingAdmin:
    """Stands in for TransactionAdmin at the coordinator boundary: the first caller commits, later
    ones find the transaction already committed (what the coordinator answers)."""

    lock: threading.Lock
    first: list[bool]

    def commit(self, committables, *, max_workers=16):
        with self.lock:
            mine = self.first.pop() if self.first else False
        return [
            TxnOutcome(c.transactional_id, "committed" if mine else "already_committed") for c in committables
        ]


def test_concurrent_commits_keep_a_truthful_report(tmp_path):
    uri = (tmp_path / "p" / "checkpoint-000000000001.json").as_uri()
    write_manifest(uri, manifest(ManifestStatus.PREPARED, ["p-0-1", "p-1-1"]))
    admin = RacingAdmin(threading.Lock(), [True])
    reports = []
    threads = [
        threading.Thread(
            target=lambda n=n: reports.append(commit_checkpoint(admin, uri, committed_by=f"c{n}"))
        )
        for n in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(r.status for r in reports) == ["already_committed"] * 3 + ["committed"]
    stored = read_manifest(uri)
    assert stored.status is ManifestStatus.COMMITTED
    assert stored.commit_report["status"] == "committed"
    assert stored.commit_report["outcomes"] == {"committed": 2}
    (winner,) = [r for r in reports if r.status == "committed"]
    assert stored.commit_report["committed_by"] == winner.committed_by


def test_a_later_already_committed_never_overwrites_committed(tmp_path):
    uri = (tmp_path / "p" / "checkpoint-000000000001.json").as_uri()
    write_manifest(uri, manifest(ManifestStatus.PREPARED, ["p-0-1"]))
    first = commit_checkpoint(RacingAdmin(threading.Lock(), [True]), uri, committed_by="commit task")
    again = commit_checkpoint(RacingAdmin(threading.Lock(), []), uri, committed_by="cleanup")
    assert (first.status, again.status) == ("committed", "already_committed")
    assert again.committed_by == "commit task" and "already committed" in again.summary()
    assert read_manifest(uri).commit_report["committed_by"] == "commit task"


def test_mark_aborted_is_refused_for_a_committed_manifest_and_commit_for_an_aborted_one(tmp_path):
    committed = (tmp_path / "p" / "checkpoint-000000000001.json").as_uri()
    write_manifest(committed, manifest(ManifestStatus.COMMITTED, ["p-0-1"]))
    with pytest.raises(KafkaEosError, match="is COMMITTED; it cannot be marked ABORTED"):
        mark_aborted(committed, ["test"], aborted_by="test")
    aborted = (tmp_path / "p" / "checkpoint-000000000002.json").as_uri()
    write_manifest(aborted, manifest(ManifestStatus.PREPARED, ["p-0-2"], 2))
    mark_aborted(aborted, ["lost"], aborted_by="test")
    assert read_manifest(aborted).commit_report == {"aborted_by": "test", "reasons": ["lost"]}
    with pytest.raises(DataLossError, match="is ABORTED"):
        commit_checkpoint(RacingAdmin(threading.Lock(), [True]), aborted, committed_by="test")
