"""The soak reuses two sibling folders' helpers: the real Airflow stack (``tests/airflow_scheduler``)
and the 3-node cluster's health checks (``tests/cluster``). Test folders are not packages here, so
their folders go on the import path, as pytest puts each test's own folder there."""

from __future__ import annotations

import pathlib
import sys

TESTS = pathlib.Path(__file__).resolve().parents[1]
for folder in ("airflow_scheduler", "cluster"):
    if str(TESTS / folder) not in sys.path:
        sys.path.insert(0, str(TESTS / folder))
