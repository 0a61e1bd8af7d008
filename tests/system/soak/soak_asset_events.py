"""The soak's Asset-event check: one event per committed checkpoint, however the run got there.

Issue 39's rule, held against what Airflow recorded (its REST API, or afterwards the run's own
metadata database: :func:`events_from_database`): every COMMITTED checkpoint that holds records
has exactly one Asset event from its pipeline's DAG naming it (``extra.checkpoint_id``), with the
checkpoint's input identity as ``partition_key`` when the event went to the declared topic Asset;
an ABORTED or still PREPARED checkpoint, or an empty one, has none. A second event for one
checkpoint is *duplicated* (a re-trigger, a cleared or retried commit task announcing again), a
COMMITTED checkpoint without one is *missing* (a commit task killed between its commit and its
success, never announced by a later try), an event for a checkpoint that is not COMMITTED is
*unexpected*.

Like the rest of the checker it imports nothing from the provider: the checkpoints come from the
manifests' JSON the checker already read (``soak_checker.read_manifests``) or from the history.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PAGE = 100
MAX_KEY_CHARS = 250  # Airflow's partition_key column


@dataclass(frozen=True)
class Checkpoint:
    """What the rule needs of a checkpoint: its status, whether it holds records, its input."""

    status: str
    has_records: bool
    input_id: str | None


def checkpoints_from_manifests(manifests: Iterable[Mapping[str, Any]]) -> dict[int, Checkpoint]:
    """From the manifests as the checker reads them (their documented JSON). A Kafka input's offsets
    transaction (``input.offsets_transactional_id``) is one of the committables, its ``record_count``
    the partitions whose offset it moves: it makes nothing visible in the topic, so a checkpoint that
    holds only it (input read, no record written) owes no event."""
    return {int(m["checkpoint_id"]): Checkpoint(m["status"], _writes_records(m),
                                                (m.get("input") or {}).get("id")) for m in manifests}


def _writes_records(manifest: Mapping[str, Any]) -> bool:
    offsets_id = (manifest.get("input") or {}).get("offsets_transactional_id")
    return sum(int(c.get("record_count") or 0) for c in manifest.get("committables") or []
               if offsets_id is None or c.get("transactional_id") != offsets_id) > 0


def checkpoints_from_history(history: Iterable[Mapping[str, Any]]) -> dict[int, Checkpoint]:
    """From the history's manifest transitions (the last one of each checkpoint), for a run whose
    store is gone (moto keeps it in memory). The file pipeline's batches hold 20-60 records each."""
    found: dict[int, Checkpoint] = {}
    for entry in history:
        if entry.get("kind") == "manifest":
            found[int(entry["checkpoint"])] = Checkpoint(entry["status"], True, entry.get("input"))
    return found


def judge_events(events: Iterable[Mapping[str, Any]], checkpoints: Mapping[int, Checkpoint],
                 pipeline_id: str, *, keyed: bool) -> dict[str, Any]:
    """The verdict for one pipeline: its events (``extra``, ``partition_key``) against its checkpoints.

    ``keyed``: the DAG declares its topic's Asset (and Airflow >= 3.2), so every event must carry
    its partition key; without it an event goes through the alias, keyless by Airflow's design.
    """
    owed = {cid for cid, c in checkpoints.items() if c.status == "COMMITTED" and c.has_records}
    mine = [(cid, e.get("partition_key")) for e in events for pid, cid in announced(e) if pid == pipeline_id]
    seen = Counter(cid for cid, _ in mine)
    with_key = [(cid, key) for cid, key in mine if key]
    wrong_keys = sorted({
        str(cid) for cid, key in with_key
        if cid in checkpoints and key != partition_key(checkpoints[cid].input_id, cid)})
    verdict: dict[str, Any] = {
        "events": len(mine), "owed": len(owed), "with_partition_key": len(with_key),
        "without_partition_key": sorted({str(cid) for cid, key in mine if keyed and not key}),
        "duplicated": sorted(str(cid) for cid, n in seen.items() if n > 1),
        "missing": sorted(str(cid) for cid in owed - set(seen)),
        "unexpected": sorted(str(cid) for cid in set(seen) - owed),
        "wrong_partition_key": wrong_keys,
    }
    verdict["ok"] = not any(verdict[k] for k in ("duplicated", "missing", "unexpected", "wrong_partition_key",
                                                 "without_partition_key"))
    return verdict


def announced(event: Mapping[str, Any]) -> list[tuple[Any, int]]:
    """The ``(pipeline_id, checkpoint_id)`` an event announces. The commit task's events name one
    checkpoint in their ``extra``; a cleanup try that committed several checkpoints of one topic emits
    one event per partition key sharing one ``extra`` that lists them under ``checkpoints``: the event
    announces the entry with its partition key (docs/user-guide/airflow-3.md)."""
    extra = dict(event.get("extra") or {})
    entries = extra.get("checkpoints")
    if not isinstance(entries, list):
        return [(extra.get("pipeline_id"), int(extra["checkpoint_id"]))] if "checkpoint_id" in extra else []
    key = event.get("partition_key")
    return [(e.get("pipeline_id"), int(e["checkpoint_id"])) for e in entries
            if key is None or e.get("partition_key") == key]


def partition_key(input_id: str | None, checkpoint_id: int) -> str:
    """The key the rule expects (docs/user-guide/airflow-3.md): the input identity, a digest of it
    beyond Airflow's 250 characters, ``checkpoint-<id>`` for a checkpoint without input."""
    if not input_id:
        return f"checkpoint-{checkpoint_id}"
    if len(input_id) > MAX_KEY_CHARS:
        return "input-sha256:" + hashlib.sha256(input_id.encode()).hexdigest()
    return input_id


def events_from_rest(client: Any, dag_id: str) -> list[dict[str, Any]]:
    """Every Asset event the DAG's tasks emitted, page by page (Airflow's ``GET /assets/events``).
    A pipeline's checkpoints are announced by its own DAG or, for a run that ended before its commit,
    by ``eos_cleanup``: the verdict reads both."""
    events: list[dict[str, Any]] = []
    while True:
        page = client.request("GET", "/assets/events", params={
            "source_dag_id": dag_id, "limit": PAGE, "offset": len(events), "order_by": "timestamp"})
        events += page["asset_events"]
        if len(events) >= page["total_entries"] or not page["asset_events"]:
            return events


def events_from_database(path: str, dag_id: str) -> list[dict[str, Any]]:
    """The same events read from a finished run's SQLite metadata database (the soak keeps it)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT extra, partition_key FROM asset_event WHERE source_dag_id = ? ORDER BY id",
                          (dag_id,)).fetchall()
    return [{"extra": json.loads(extra) if isinstance(extra, str) else extra, "partition_key": key}
            for extra, key in rows]
