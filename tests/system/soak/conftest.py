"""The soak reuses its siblings' helpers: the real Airflow stack (``tests/system/airflow_scheduler``),
the 3-node cluster's health checks (``tests/system/cluster``) and the example DAGs' sample-event writer
(``dags/``). Test folders are not packages here, so their folders go on the import path, as
pytest puts each test's own folder there."""

from __future__ import annotations

import pathlib
import sys

SYSTEM = pathlib.Path(__file__).resolve().parents[1]
REPO = SYSTEM.parents[1]
for folder in (SYSTEM / "airflow_scheduler", SYSTEM / "cluster", REPO / "dags"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
