"""Fixtures of the real-scheduler tests (the stack itself is in ``airflow_stack.py``)."""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from airflow_stack import airflow_stack  # noqa: F401  (the fixture)
