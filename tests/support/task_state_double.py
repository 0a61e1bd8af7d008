"""A task state store kept in a JSON file: the boundary this suite cannot run outside a scheduler.

Airflow 3.3's ``context["task_state_store"]`` talks to the task's supervisor, which talks to the API
server's database; a try run by a test (``operator.execute(context)``) has no supervisor. This
double has the accessor's ``get``/``set`` and survives the process that wrote it, as the real store
survives a killed try. The real store is used by the real-scheduler tests. Used by
``tests/tasks/test_reattach.py`` (the rule) and ``tests/system/spark_cluster`` (the re-attach on the
standalone cluster).
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any


class FileTaskStateStore:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = pathlib.Path(path)

    def _read(self) -> dict[str, Any]:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def get(self, key: str, default: Any = None) -> Any:
        return self._read().get(key, default)

    def set(self, key: str, value: Any) -> None:
        data = {**self._read(), key: value}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.path)  # a reader sees the old or the new record, never half of one
