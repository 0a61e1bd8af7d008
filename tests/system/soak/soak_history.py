"""The soak's history: one JSON object per line, appended as things happen, read by the checker.

Every event carries the wall time (``t``, epoch seconds) and a ``kind``: ``batch`` (input written:
its name and keys), ``trigger`` (a DAG run asked for: batch, run id), ``run`` (a run's end state),
``fault`` (what the nemesis did to which process, and when it undid it), ``check`` (a checker
verdict taken during the run), ``phase`` (start, quiet period, end). Appends are flushed line by
line so that a soak killed half way still leaves a readable history up to its last event.
"""

from __future__ import annotations

import json
import pathlib
import threading
import time
from collections.abc import Iterator
from typing import Any


class History:
    """Append-only JSONL file, safe to write from the nemesis thread and the driver at once."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._file = path.open("a", encoding="utf-8")

    def record(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"t": round(time.time(), 3), "kind": kind, **fields}
        line = json.dumps(event, sort_keys=True)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()
        return event

    def close(self) -> None:
        with self._lock:
            self._file.close()


def read_history(path: pathlib.Path) -> Iterator[dict[str, Any]]:
    """The events in order; a last line cut short by a kill is left out (it was never complete)."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.endswith("\n"):
                return
            yield json.loads(line)
