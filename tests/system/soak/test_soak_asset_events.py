"""The soak's Asset-event rule on hand-made events and checkpoints (no Airflow, no Kafka)."""

from __future__ import annotations

import sqlite3

from soak_asset_events import (
    Checkpoint,
    checkpoints_from_history,
    checkpoints_from_manifests,
    events_from_database,
    judge_events,
    partition_key,
)


def _event(cid: int, key: str | None, pipeline: str = "soak") -> dict:
    return {"extra": {"pipeline_id": pipeline, "checkpoint_id": cid}, "partition_key": key}


CHECKPOINTS = {
    1: Checkpoint("COMMITTED", True, "b1"),
    2: Checkpoint("COMMITTED", True, "b2"),
    3: Checkpoint("ABORTED", True, "b3"),
    4: Checkpoint("COMMITTED", False, "b4"),  # empty: no event owed
    5: Checkpoint("PREPARED", True, "b5"),
}


def test_one_keyed_event_per_committed_checkpoint_with_records_is_clean():
    verdict = judge_events([_event(1, "b1"), _event(2, "b2"), _event(9, "x", "other")], CHECKPOINTS, "soak",
                           keyed=True)
    assert verdict["ok"] and (verdict["events"], verdict["owed"], verdict["with_partition_key"]) == (2, 2, 2)


def test_each_way_to_break_the_rule_is_named():
    events = [_event(1, "b1"), _event(1, "b1"), _event(3, "b3"), _event(4, "b4"), _event(5, "wrong")]
    verdict = judge_events(events, CHECKPOINTS, "soak", keyed=True)
    assert not verdict["ok"]
    assert verdict["duplicated"] == ["1"] and verdict["missing"] == ["2"]
    assert verdict["unexpected"] == ["3", "4", "5"] and verdict["wrong_partition_key"] == ["5"]


def test_a_keyless_event_fails_only_where_keys_are_due():
    assert not judge_events([_event(1, None), _event(2, "b2")], CHECKPOINTS, "soak", keyed=True)["ok"]
    assert judge_events([_event(1, None), _event(2, None)], CHECKPOINTS, "soak", keyed=False)["ok"]


def test_one_cleanup_try_announcing_two_checkpoints_of_a_topic_counts_once_each():
    """Its events share one ``extra`` listing both; each event announces the entry with its key."""
    shared = {"checkpoints": [{"pipeline_id": "soak", "checkpoint_id": 1, "partition_key": "b1"},
                              {"pipeline_id": "soak", "checkpoint_id": 2, "partition_key": "b2"}]}
    events = [{"extra": shared, "partition_key": "b1"}, {"extra": shared, "partition_key": "b2"}]
    verdict = judge_events(events, CHECKPOINTS, "soak", keyed=True)
    assert verdict["ok"] and (verdict["events"], verdict["with_partition_key"]) == (2, 2), verdict
    assert judge_events(events[:1], CHECKPOINTS, "soak", keyed=True)["missing"] == ["2"]


def test_the_key_is_the_input_identity_or_its_digest():
    assert partition_key("b00001", 7) == "b00001" and partition_key(None, 7) == "checkpoint-7"
    assert partition_key("k" * 251, 7).startswith("input-sha256:")


def test_checkpoints_and_events_are_read_back_from_a_finished_run(tmp_path):
    history = [{"kind": "manifest", "checkpoint": 1, "status": "PREPARED", "input": "b1"},
               {"kind": "manifest", "checkpoint": 1, "status": "COMMITTED", "input": "b1"},
               {"kind": "batch", "batch": "b1"}]
    assert checkpoints_from_history(history) == {1: Checkpoint("COMMITTED", True, "b1")}
    db = tmp_path / "airflow.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE asset_event "
                     "(id INTEGER, extra TEXT, partition_key TEXT, source_dag_id TEXT)")
        extra = '{"pipeline_id": "soak", "checkpoint_id": 1}'
        conn.execute("INSERT INTO asset_event VALUES (1, ?, 'b1', 'eos_pipeline')", (extra,))
        conn.execute("INSERT INTO asset_event VALUES (2, '{}', NULL, 'other_dag')")
    assert events_from_database(str(db), "eos_pipeline") == [_event(1, "b1")]


def test_checkpoints_are_read_from_manifests_in_their_documented_json():
    """The manifest's own field names (docs/manifest-format.md), as the checker reads them."""
    manifests = [
        {"checkpoint_id": 1, "status": "COMMITTED", "input": {"id": "b1"},
         "committables": [{"record_count": 0}, {"record_count": 3}]},
        {"checkpoint_id": 2, "status": "COMMITTED", "input": None, "committables": [{"record_count": 0}]},
        # a Kafka input read with nothing written: only the group's offsets transaction (found by the
        # 2026-11-29 production soak: the checker owed it an event the provider rightly never emits)
        {"checkpoint_id": 3, "status": "COMMITTED",
         "input": {"id": "kafka:3", "offsets_transactional_id": "k2k-offsets"},
         "committables": [{"transactional_id": "k2k-offsets", "record_count": 2}]},
        {"checkpoint_id": 4, "status": "COMMITTED",
         "input": {"id": "kafka:4", "offsets_transactional_id": "k2k-offsets"},
         "committables": [{"transactional_id": "k2k-offsets", "record_count": 2},
                          {"transactional_id": "k2k-0-4", "record_count": 5}]},
    ]
    assert checkpoints_from_manifests(manifests) == {
        1: Checkpoint("COMMITTED", True, "b1"), 2: Checkpoint("COMMITTED", False, None),
        3: Checkpoint("COMMITTED", False, "kafka:3"), 4: Checkpoint("COMMITTED", True, "kafka:4")}
