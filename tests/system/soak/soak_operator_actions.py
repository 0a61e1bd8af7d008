"""The soak's operator actions beside its triggers (issue 39): a finished run cleared, days
backfilled and backfilled again with reprocess "completed", and the downstream DAG's runs counted.

What an operator does to runs that already ended must neither write a batch again nor announce it
again: a cleared run and a reprocessed backfill run find their batch COMMITTED and skip, and
``eos_downstream`` (on the topic's partitioned Asset) runs once per committed batch whatever
happened before. The checker judges the data as for any run; :func:`judge_downstream_runs` judges
the downstream DAG.

Backfills need a schedule: the soak gives the pipeline :data:`SCHEDULE` and backfills days of
January 2026, whose batches it writes first (a scheduled run's batch is its data interval end,
``dags/eos_pipeline.py``). The run the scheduler makes for the latest day has no input and is
skipped; the driver does not track it.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from soak_asset_events import Checkpoint, partition_key
from soak_history import History

SCHEDULE = "0 0 * * *"
FIRST_DAY = dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)
BATCH_FORMAT = "%Y%m%dT%H%M%S"  # dags/eos_pipeline.py's, for a run's data interval end
CLEAR_SHARE, BACKFILL_SHARE = 0.1, 0.08  # of the driver's ticks with room for a run
DAG_ID = "eos_pipeline"


class OperatorActions:
    """Draws, on the driver's ticks with room for a run, a clear or a backfill (or nothing)."""

    def __init__(self, stack: Any, history: History, rng: random.Random,
                 write_batch: Callable[[str], list[str]], retrying: Callable[..., Any]) -> None:
        self._stack, self._history, self._rng = stack, history, rng
        self._write_batch, self._retrying = write_batch, retrying
        self._finished: dict[str, str] = {}  # run id -> batch: ended runs a person could clear
        self._ranges: list[tuple[dt.datetime, dt.datetime]] = []  # days backfilled so far
        self._backfill_runs: set[str] = set()
        self._written: set[str] = set()
        self.done: Counter[str] = Counter()

    def finished(self, run_id: str, batch: str) -> None:
        """The driver saw this run end."""
        self._finished[run_id] = batch

    def step(self, active: dict[str, str]) -> bool:
        """One drawn action; True when it put runs into ``active``."""
        draw = self._rng.random()
        if draw < CLEAR_SHARE and self._finished:
            return self._clear(active)
        if draw < CLEAR_SHARE + BACKFILL_SHARE and not self._backfill_runs & set(active):
            return self._backfill(active)
        return False

    def _clear(self, active: dict[str, str]) -> bool:
        run_id = self._rng.choice(sorted(self._finished))
        batch = self._finished.pop(run_id)
        try:
            self._stack.request("POST", f"/dags/{DAG_ID}/dagRuns/{run_id}/clear", json={"dry_run": False})
        except Exception as err:  # the api-server is down: a person would try another time
            self._history.record("clear_refused", run_id=run_id, batch=batch, error=str(err)[:200])
            return False
        active[run_id] = batch
        self.done["clear"] += 1
        self._history.record("trigger", batch=batch, run_id=run_id, why="cleared after it ended")
        return True

    def _backfill(self, active: dict[str, str]) -> bool:
        """Two new days, or (one time in three) days already backfilled, with reprocess "completed"."""
        again = bool(self._ranges) and self._rng.random() < 1 / 3
        if again:
            start, end = self._rng.choice(self._ranges)
        else:
            start = FIRST_DAY + dt.timedelta(days=2 * len(self._ranges))
            end = start + dt.timedelta(days=1)
            for day in (start, end):
                batch = day.strftime(BATCH_FORMAT)
                keys = self._write_batch(batch)
                self._written.add(batch)
                self._history.record("batch", batch=batch, keys=keys)
        body = {"dag_id": DAG_ID, "from_date": start.isoformat(), "to_date": end.isoformat(),
                "reprocess_behavior": "completed" if again else "none", "max_active_runs": 1}
        try:
            self._stack.request("POST", "/backfills", json=body)
        except Exception as err:  # refused (one still active, 409) or not answered: runs made are found below
            self._history.record("backfill_refused", body=body, error=str(err)[:200])
        runs = self._retrying("the backfill's runs", lambda: self._stack.request(
            "GET", f"/dags/{DAG_ID}/dagRuns", params={
                "run_type": "backfill", "logical_date_gte": start.isoformat(),
                "logical_date_lte": end.isoformat(), "limit": 10})["dag_runs"])
        if not again:
            self._ranges.append((start, end))
        started = False
        for run in runs:
            batch = dt.datetime.fromisoformat(run["data_interval_end"]).strftime(BATCH_FORMAT)
            if batch not in self._written:
                raise AssertionError(f"backfill run {run['dag_run_id']} reads batch {batch}, which the soak "
                                     f"never wrote: the soak's schedule and its days disagree")
            if run["state"] in ("queued", "running") and run["dag_run_id"] not in active:
                active[run["dag_run_id"]] = batch
                self._backfill_runs.add(run["dag_run_id"])
                self._finished.pop(run["dag_run_id"], None)
                self._history.record("trigger", batch=batch, run_id=run["dag_run_id"],
                                     why="backfill, reprocess completed" if again else "backfill")
                started = True
        self.done["backfill again" if again else "backfill"] += 1
        return started


def downstream_runs(client: Any, dag_id: str = "eos_downstream") -> list[dict[str, Any]]:
    """The downstream DAG's runs, page by page (their ``partition_key`` names the batch)."""
    runs: list[dict[str, Any]] = []
    while True:
        page = client.request("GET", f"/dags/{dag_id}/dagRuns", params={"limit": 100, "offset": len(runs)})
        runs += page["dag_runs"]
        if len(runs) >= page["total_entries"] or not page["dag_runs"]:
            return runs


def judge_downstream_runs(runs: Iterable[Mapping[str, Any]],
                          checkpoints: Mapping[int, Checkpoint]) -> dict[str, Any]:
    """One downstream run per committed batch with records, keyed by its batch; none for anything else."""
    owed = {partition_key(c.input_id, cid) for cid, c in checkpoints.items()
            if c.status == "COMMITTED" and c.has_records}
    seen = Counter(r.get("partition_key") for r in runs)
    verdict: dict[str, Any] = {
        "runs": sum(seen.values()), "owed": len(owed),
        "duplicated": sorted(str(k) for k, n in seen.items() if n > 1),
        "missing": sorted(owed - set(seen)),
        "unexpected": sorted(str(k) for k in set(seen) - owed),
    }
    verdict["ok"] = not any(verdict[k] for k in ("duplicated", "missing", "unexpected"))
    return verdict
