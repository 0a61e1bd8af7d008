"""The provider's metrics, through Airflow's Stats (StatsD / OpenTelemetry, as Airflow is configured).

Names (all under ``kafka_eos.``; tags ``pipeline_id`` / ``topic`` where known):

=====================================  =======  ==================================================
``kafka_eos.commit.latency``           timing   ms the commit of one checkpoint took (EndTxn calls)
``kafka_eos.transactions.committed``   counter  transactions a commit task committed
``kafka_eos.transactions.aborted``     counter  transactions the abort operator aborted
``kafka_eos.lingering.found``          gauge    lingering transactions + LSO stalls one scan found
``kafka_eos.lso.oldest_stall_age``     gauge    ms the oldest stalled LSO has been pinned (0: none)
=====================================  =======  ==================================================

Metrics are best effort: a metrics backend that fails never fails the task.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

COMMIT_LATENCY = "kafka_eos.commit.latency"
TRANSACTIONS_COMMITTED = "kafka_eos.transactions.committed"
TRANSACTIONS_ABORTED = "kafka_eos.transactions.aborted"
LINGERING_FOUND = "kafka_eos.lingering.found"
LSO_OLDEST_STALL_AGE = "kafka_eos.lso.oldest_stall_age"

__all__ = [
    "COMMIT_LATENCY",
    "LINGERING_FOUND",
    "LSO_OLDEST_STALL_AGE",
    "TRANSACTIONS_ABORTED",
    "TRANSACTIONS_COMMITTED",
    "record_abort",
    "record_commit",
    "record_scan",
]


def stats() -> Any:
    """Airflow's Stats (the Task SDK's since 3.1; the core module before)."""
    try:
        from airflow.sdk.observability.stats import Stats
    except ImportError:  # pragma: no cover - older Airflow
        from airflow.stats import Stats  # type: ignore[no-redef]
    return Stats


def _tags(**tags: Any) -> dict[str, str]:
    return {k: str(v) for k, v in tags.items() if v not in (None, "")}


def record_commit(report: Mapping[str, Any]) -> None:
    """A commit report (``operators/commit.py:commit_report``): latency and transactions committed."""
    tags = _tags(pipeline_id=report.get("pipeline_id"), topic=report.get("topic"))
    committed = int((report.get("outcomes") or {}).get("committed", 0))
    with _best_effort():
        stats().timing(COMMIT_LATENCY, int(report.get("commit_latency_ms", 0)), tags=tags)
        if committed:
            stats().incr(TRANSACTIONS_COMMITTED, committed, tags=tags)


def record_abort(aborted: int) -> None:
    """Transactions the abort operator aborted in one run."""
    if aborted:
        with _best_effort():
            stats().incr(TRANSACTIONS_ABORTED, int(aborted))


def record_scan(findings: Any) -> None:
    """One lingering scan (``Findings``): how much it found, and the oldest stalled LSO's age."""
    stalls = list(getattr(findings, "lso_stalls", ()) or ())
    found = len(getattr(findings, "transactions", ()) or ()) + len(stalls)
    oldest = max((int(getattr(s, "stalled_for_ms", 0) or 0) for s in stalls), default=0)
    with _best_effort():
        stats().gauge(LINGERING_FOUND, found)
        stats().gauge(LSO_OLDEST_STALL_AGE, oldest)


@contextlib.contextmanager
def _best_effort():
    try:
        yield
    except Exception as err:  # a metrics backend problem must never fail a commit or a scan
        log.warning("could not record kafka_eos metrics: %s", err)
