"""Classification of lingering transactions and LSO stalls (pure logic, no network)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from airflow_provider_kafka_eos import runbook
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import Manifest, ManifestStatus
from airflow_provider_kafka_eos.kafka.checkpoints.store import prepared_index
from airflow_provider_kafka_eos.kafka.operations.classify import FindingKind, classify
from airflow_provider_kafka_eos.kafka.operations.lso_stalls import (
    LsoStallTracker,
    PartitionOffsets,
    ProducerState,
    find_lso_stalls,
)
from airflow_provider_kafka_eos.kafka.operations.scan import Findings
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable

NOW = 1_800_000_000_000


@dataclass(frozen=True)
class Described:
    """The fields of ``TransactionAdmin.describe`` results that classification reads."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str = "Ongoing"
    timeout_ms: int = 60_000
    start_time_ms: int = NOW - 120_000
    partitions: tuple = (("out", 0),)


def manifest(status: ManifestStatus, *ids_pids_epochs: tuple[str, int, int], checkpoint: int = 7) -> Manifest:
    committables = [
        Committable(
            transactional_id=tid,
            producer_id=pid,
            producer_epoch=epoch,
            partitions=(("out", 0),),
            record_count=3,
            prepared_at_ms=NOW - 100_000,
            transaction_start_ms=NOW - 110_000,
            transaction_timeout_ms=900_000,
            transaction_version=2,
            end_txn_version=5,
        )
        for tid, pid, epoch in ids_pids_epochs
    ]
    return Manifest(
        pipeline_id="orders",
        checkpoint_id=checkpoint,
        transactional_id_prefix="orders-",
        naming_strategy="INCREMENTING",
        topic="out",
        status=status,
        committables=committables,
        created_at_ms=NOW - 100_000,
        updated_at_ms=NOW - 100_000,
    )


def test_three_kinds_and_manifest_wins_over_prefix():
    prepared = prepared_index(
        [
            (
                "file:///m/orders/checkpoint-000000000007.json",
                manifest(ManifestStatus.PREPARED, ("orders-1-7", 11, 0)),
            ),
            # A committed manifest casts no vote that is still owed: its ids may be orphans.
            (
                "file:///m/orders/checkpoint-000000000006.json",
                manifest(ManifestStatus.COMMITTED, ("orders-0-7", 10, 0), checkpoint=6),
            ),
        ]
    )
    findings = classify(
        [
            Described("orders-0-7", 10, 0),
            Described("orders-1-7", 11, 0),
            Described("billing-0-1", 12, 3),
        ],
        owned_prefixes=["orders-"],
        prepared=prepared,
        at_ms=NOW,
    )
    kinds = {f.transactional_id: f.kind for f in findings}
    assert kinds == {
        "orders-0-7": FindingKind.ORPHAN,
        "orders-1-7": FindingKind.COMMIT_PENDING,
        "billing-0-1": FindingKind.FOREIGN,
    }
    pending = next(f for f in findings if f.kind is FindingKind.COMMIT_PENDING)
    assert pending.manifest_uri == "file:///m/orders/checkpoint-000000000007.json"
    assert pending.age_ms == 120_000
    assert pending.partitions == ("out-0",)


def test_commit_pending_even_when_epoch_differs_and_reason_says_so():
    prepared = prepared_index(
        [
            (
                "file:///m/o/checkpoint-000000000001.json",
                manifest(ManifestStatus.PREPARED, ("orders-0-1", 10, 2)),
            )
        ]
    )
    [finding] = classify(
        [Described("orders-0-1", 10, 4)], owned_prefixes=["orders-"], prepared=prepared, at_ms=NOW
    )
    assert finding.kind is FindingKind.COMMIT_PENDING
    assert "epoch 2" in finding.reason and "epoch 4" in finding.reason
    assert "what became of the recorded one" in finding.reason


def test_without_owned_prefixes_nothing_is_an_orphan():
    [finding] = classify([Described("orders-0-1", 10, 0)], owned_prefixes=[], prepared={}, at_ms=NOW)
    assert finding.kind is FindingKind.FOREIGN


def test_prefix_match_is_a_plain_prefix():
    findings = classify(
        [Described("orders-0-1", 1, 0), Described("orders2-0-1", 2, 0)],
        owned_prefixes=["orders-"],
        prepared={},
        at_ms=NOW,
    )
    assert {f.transactional_id: f.kind for f in findings} == {
        "orders-0-1": FindingKind.ORPHAN,
        "orders2-0-1": FindingKind.FOREIGN,
    }


def test_findings_json_round_trip_holds_no_config():
    findings = Findings(
        checked_at_ms=NOW,
        min_age_ms=60_000,
        prefixes=("orders-",),
        transactions=classify(
            [Described("orders-0-1", 1, 0)], owned_prefixes=["orders-"], prepared={}, at_ms=NOW
        ),
    )
    data = json.loads(json.dumps(findings.to_dict()))
    assert data["counts"] == {"orphan": 1, "commit-pending": 0, "foreign": 0, "lso-stall": 0}
    assert data["transactions"][0]["runbook"] == runbook.reference("orphaned-transaction")
    assert Findings.from_dict(data).to_dict() == findings.to_dict()
    assert "orders-0-1" in findings.table()
    many = Findings(
        checked_at_ms=NOW,
        min_age_ms=0,
        prefixes=None,
        transactions=classify(
            [Described(f"orders-{i}", i, 0) for i in range(5)],
            owned_prefixes=["orders-"],
            prepared={},
            at_ms=NOW,
        ),
    )
    assert many.table(limit=2).splitlines()[-1].split()[:3] == ["...", "3", "more"]


def poll(lso: int, hw: int, *producers: ProducerState) -> PartitionOffsets:
    return PartitionOffsets("out", 3, last_stable_offset=lso, high_watermark=hw, producers=producers)


def test_lso_stall_needs_the_threshold_and_data_behind_the_lso():
    tracker = LsoStallTracker()
    recent = ProducerState(
        producer_id=42, producer_epoch=1, last_timestamp_ms=NOW, current_txn_start_offset=5
    )
    args = dict(
        min_stall_ms=30_000, tracker=tracker, producer_transactions={}, owned_prefixes=[], prepared={}
    )
    # First sight: pinned only now, producer wrote just now -> not (yet) a stall.
    assert find_lso_stalls([poll(5, 9, recent)], at_ms=NOW, **args) == []
    # Same LSO 31 s later while the high watermark moved -> stall, measured from the first sight.
    [stall] = find_lso_stalls([poll(5, 12, recent)], at_ms=NOW + 31_000, **args)
    assert stall.stalled_for_ms == 31_000
    assert stall.blocking_producer_id == 42
    assert "high watermark moved" in stall.reason
    # The LSO moved on: the clock restarts.
    assert find_lso_stalls([poll(12, 13, recent)], at_ms=NOW + 62_000, **args) == []
    # LSO == HW: nothing held back, never a stall.
    assert find_lso_stalls([poll(13, 13)], at_ms=NOW + 200_000, **args) == []


def test_lso_stall_from_a_silent_producer_names_it_on_first_sight():
    silent = ProducerState(
        producer_id=42, producer_epoch=3, last_timestamp_ms=NOW - 600_000, current_txn_start_offset=5
    )
    other = ProducerState(
        producer_id=43, producer_epoch=0, last_timestamp_ms=NOW, current_txn_start_offset=-1
    )
    [stall] = find_lso_stalls(
        [poll(5, 9, other, silent)],
        min_stall_ms=60_000,
        tracker=LsoStallTracker(),
        producer_transactions={42: "orders-0-3"},
        owned_prefixes=["orders-"],
        prepared={},
        at_ms=NOW,
    )
    assert (stall.blocking_producer_id, stall.blocking_producer_epoch) == (42, 3)
    assert stall.transactional_id == "orders-0-3"
    assert stall.kind is FindingKind.ORPHAN
    assert stall.stalled_for_ms == 600_000


def test_lso_stall_by_an_unnamed_producer_is_foreign():
    silent = ProducerState(
        producer_id=77, producer_epoch=0, last_timestamp_ms=NOW - 600_000, current_txn_start_offset=5
    )
    [stall] = find_lso_stalls(
        [poll(5, 9, silent)],
        min_stall_ms=60_000,
        tracker=LsoStallTracker(),
        producer_transactions={},
        owned_prefixes=["orders-"],
        prepared={},
        at_ms=NOW,
    )
    assert stall.kind is FindingKind.FOREIGN and stall.transactional_id is None
    assert "producer 77" in stall.reason
    assert json.loads(json.dumps(stall.to_dict()))["next_step"] == "identify the producer"


def test_tracker_state_survives_json():
    tracker = LsoStallTracker()
    tracker.observe(poll(5, 9), NOW)
    copy = LsoStallTracker.from_dict(json.loads(json.dumps(tracker.to_dict())))
    assert copy.observe(poll(5, 10), NOW + 5) == (NOW, True)


@pytest.mark.parametrize("status", [ManifestStatus.COMMITTED, ManifestStatus.ABORTED])
def test_only_prepared_manifests_index(status):
    assert prepared_index([("u", manifest(status, ("orders-0-1", 1, 0)))]) == {}
