"""Durable coordinator state: an append-only JSON-lines journal plus a compacted snapshot.

Kafka keeps transaction metadata in the compacted ``__transaction_state`` topic and replays it
when a coordinator loads a partition. This journal plays that role: every state change appends
the full record of one transactional id (last record wins, like log compaction), and ``load``
compacts the journal into an atomically replaced snapshot. Lines are flushed to the OS on every
write but never fsync'ed, so a broker process that dies keeps its state (what the tests need)
while thousands of transactions a second stay cheap; a power cut may lose the tail, which a
test broker accepts.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any, TextIO

SNAPSHOT_NAME = "txn-state.snapshot.json"
# Compact a running journal once it holds this many lines and more than twice as many as live ids.
COMPACT_AFTER_LINES = 50_000
JOURNAL_NAME = "txn-state.journal.jsonl"


class TxnJournal:
    """Persistence of coordinator records under ``<data_dir>/txn-coordinator``."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.directory = pathlib.Path(data_dir) / "txn-coordinator"
        self.directory.mkdir(parents=True, exist_ok=True)
        self._journal: TextIO | None = None
        self.lines = 0  # lines appended since the last compaction

    @property
    def snapshot_path(self) -> pathlib.Path:
        return self.directory / SNAPSHOT_NAME

    @property
    def journal_path(self) -> pathlib.Path:
        return self.directory / JOURNAL_NAME

    def load(self) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        """Replay snapshot + journal; returns (records by transactional id, coordinator meta).

        Compacts what it read into a fresh snapshot and starts an empty journal, so replay time
        stays proportional to the number of live ids, not to history. A torn last line (a
        process killed mid-write) is ignored, as Kafka ignores a truncated last batch.
        """
        records: dict[str, dict[str, Any]] = {}
        meta: dict[str, Any] = {}
        if self.snapshot_path.exists():
            snapshot = json.loads(self.snapshot_path.read_text())
            meta.update(snapshot.get("meta", {}))
            for rec in snapshot.get("transactions", []):
                records[rec["id"]] = rec
        if self.journal_path.exists():
            with self.journal_path.open() as journal:
                for line in journal:
                    try:
                        entry = json.loads(line)
                    except json.JSONDecodeError:
                        break
                    self._apply(entry, records, meta)
        self.compact(records, meta)
        return records, meta

    def should_compact(self, live_ids: int) -> bool:
        return self.lines >= COMPACT_AFTER_LINES and self.lines > 2 * live_ids

    def compact(self, records: dict[str, dict[str, Any]], meta: dict[str, Any]) -> None:
        """Snapshot ``records`` atomically, then empty the journal.

        Safe against a crash between the two steps: the snapshot equals the result of replaying
        the journal, so replaying the old journal over the new snapshot changes nothing.
        """
        self._write_snapshot(records, meta)
        self.close()
        self.journal_path.write_text("")
        self.lines = 0

    @staticmethod
    def _apply(entry: dict[str, Any], records: dict[str, dict[str, Any]], meta: dict[str, Any]) -> None:
        kind = entry.get("k")
        if kind == "txn":
            records[entry["r"]["id"]] = entry["r"]
        elif kind == "dead":
            records.pop(entry["id"], None)
        elif kind == "meta":
            meta.update(entry["m"])

    def _write_snapshot(self, records: dict[str, dict[str, Any]], meta: dict[str, Any]) -> None:
        tmp = self.snapshot_path.with_suffix(".tmp")
        with tmp.open("w") as out:
            json.dump({"meta": meta, "transactions": list(records.values())}, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.snapshot_path)

    def _append(self, entry: dict[str, Any]) -> None:
        if self._journal is None:
            self._journal = self.journal_path.open("a", buffering=1 << 16)
        self._journal.write(json.dumps(entry, separators=(",", ":")) + "\n")
        self._journal.flush()
        self.lines += 1

    def write_txn(self, record: dict[str, Any]) -> None:
        self._append({"k": "txn", "r": record})

    def write_dead(self, transactional_id: str) -> None:
        self._append({"k": "dead", "id": transactional_id})

    def write_meta(self, **values: Any) -> None:
        self._append({"k": "meta", "m": values})

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal = None
