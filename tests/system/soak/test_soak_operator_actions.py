"""The soak's downstream-DAG rule on hand-made runs and checkpoints (no Airflow, no Kafka)."""

from __future__ import annotations

from soak_asset_events import Checkpoint
from soak_operator_actions import judge_downstream_runs

CHECKPOINTS = {
    1: Checkpoint("COMMITTED", True, "b1"),
    2: Checkpoint("COMMITTED", True, "b2"),
    3: Checkpoint("ABORTED", True, "b3"),
    4: Checkpoint("COMMITTED", False, "b4"),  # empty: no event, so no downstream run
}


def test_one_run_per_committed_batch_is_clean():
    verdict = judge_downstream_runs([{"partition_key": "b1"}, {"partition_key": "b2"}], CHECKPOINTS)
    assert verdict["ok"] and (verdict["runs"], verdict["owed"]) == (2, 2)


def test_each_way_to_break_it_is_named():
    runs = [{"partition_key": k} for k in ("b1", "b1", "b3", "b4", None)]
    verdict = judge_downstream_runs(runs, CHECKPOINTS)
    assert not verdict["ok"]
    assert verdict["duplicated"] == ["b1"] and verdict["missing"] == ["b2"]
    assert verdict["unexpected"] == ["None", "b3", "b4"]
