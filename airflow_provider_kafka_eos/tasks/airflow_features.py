"""Which Airflow 3 primitives the running Airflow has: the one place that compares versions.

The package supports Airflow 3.1 and uses what later releases added when it is there. Every
feature that depends on the version asks :func:`has` by name, so a reader finds here what each
needs, and a log line or a docstring can say by name what an older Airflow does instead:

============================ ======= ==========================================================
name                         since   used for (older Airflow: what happens instead)
============================ ======= ==========================================================
``partitioned_asset_events`` 3.2     committed checkpoints' Asset events carry ``partition_key``
                                     = the input identity (older: the same event, no key)
``human_in_the_loop``        3.1     the manual resolution DAG's approval step (needs the standard
                                     provider's ``hitl`` module too; without it: no approval task,
                                     the typed confirmation alone, as before)
``deadline_alerts``          3.1     a pipeline DAG's deadline before its transaction timeout
                                     (``tasks/deadline.py``; older: no deadline, logged)
============================ ======= ==========================================================
"""

from __future__ import annotations

import functools

__all__ = ["FEATURES", "airflow_version", "has"]

FEATURES: dict[str, tuple[int, int]] = {
    "partitioned_asset_events": (3, 2),
    "human_in_the_loop": (3, 1),
    "deadline_alerts": (3, 1),
    "task_state_store": (3, 3),  # context["task_state_store"]: the submit task's re-attach
}


@functools.cache
def airflow_version() -> tuple[int, int]:
    """(major, minor) of the installed Airflow core."""
    from airflow import __version__

    major, minor = (int("".join(c for c in part if c.isdigit()) or 0) for part in __version__.split(".")[:2])
    return major, minor


def has(feature: str) -> bool:
    """Whether the running Airflow has ``feature`` (a name of :data:`FEATURES`; any other name is a bug)."""
    if feature not in FEATURES:
        raise KeyError(f"unknown Airflow feature {feature!r} (known: {', '.join(sorted(FEATURES))})")
    if airflow_version() < FEATURES[feature]:
        return False
    if feature == "human_in_the_loop":
        try:
            import airflow.providers.standard.operators.hitl  # noqa: F401
        except ImportError:
            return False
    if feature == "deadline_alerts":
        try:
            from airflow.sdk.definitions.deadline import AsyncCallback, DeadlineAlert  # noqa: F401
        except ImportError:
            return False
    return True
