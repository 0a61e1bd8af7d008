"""What a task knows of the DAG run executing it: the checkpoint id it derives, the identity a
manifest records, and whether another run still runs (asked of Airflow through the task's API).

The submit operator's pipeline rules (``operators/submit.py``) and the input claim
(``kafka/checkpoints/input_claims.py``) build on these; only this module reads Airflow's task
context for them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.identity import RunIdentity, checkpoint_id_from_datetime
from airflow_provider_kafka_eos.kafka.errors import UsageError

__all__ = ["checkpoint_id_for_run", "checkpoint_id_of_run_record", "run_identity", "run_state_probe"]


def _logical_date(context: Mapping[str, Any]) -> datetime | None:
    value = getattr(context.get("dag_run"), "logical_date", None) or context.get("logical_date")
    return value if isinstance(value, datetime) else None


def checkpoint_id_for_run(context: Mapping[str, Any]) -> int:
    """The run's checkpoint id: its logical date, else its ``run_after``, in microseconds.

    Why these two (the reasons are in docs/design-notes.md, "Checkpoint ids"):

    * stable for every try and every clear of one DAG run (neither value changes on a clear);
    * unique per run: Airflow keeps logical dates unique per DAG, and a run without one (a
      manual trigger) is told apart by the microsecond it was triggered, so two runs triggered
      within the same second no longer share a checkpoint (whole seconds did, and the second
      run's records were silently not written);
    * increasing from run to run of a schedule.
      A backfill of an older interval gets a *smaller* id than checkpoints already committed;
      restore and both abort strategies handle that (tests/kafka/checkpoints/test_identity.py).
    """
    run_after = getattr(context.get("dag_run"), "run_after", None)
    derived = _derived_checkpoint_id(_logical_date(context), run_after)
    if derived is not None:
        return derived
    raise UsageError("cannot derive a checkpoint id: the run has neither a logical date nor run_after; "
                     "pass checkpoint_id explicitly", runbook="rerun-a-checkpoint")


def checkpoint_id_of_run_record(dag_run: Mapping[str, Any]) -> int | None:
    """:func:`checkpoint_id_for_run` of a DAG run as Airflow hands it outside a task (a deadline
    callback's context, the REST API: ISO-8601 text), so a reader finds the run's checkpoint by name
    however old it is. None when the record has neither date (or they do not parse); a submit task
    given an explicit ``checkpoint_id`` wrote under that one instead."""
    def parsed(value: Any) -> datetime | None:
        if isinstance(value, datetime) or not value:
            return value or None
        try:
            return datetime.fromisoformat(str(value))
        except ValueError:
            return None

    return _derived_checkpoint_id(parsed(dag_run.get("logical_date")), parsed(dag_run.get("run_after")))


def _derived_checkpoint_id(logical_date: datetime | None, run_after: datetime | None) -> int | None:
    """The rule of both: the logical date, else ``run_after``."""
    for value in (logical_date, run_after):
        if isinstance(value, datetime):
            return checkpoint_id_from_datetime(value)
    return None


def run_identity(context: Mapping[str, Any]) -> RunIdentity | None:
    """The DAG run and try executing this task, as recorded in the manifest (None outside a run)."""
    dag_run = context.get("dag_run")
    dag_id = getattr(dag_run, "dag_id", None) or getattr(context.get("dag"), "dag_id", None)
    run_id = getattr(dag_run, "run_id", None) or context.get("run_id")
    if not dag_id or not run_id:
        return None
    try_number = getattr(context.get("ti"), "try_number", None)
    logical_date = _logical_date(context)
    return RunIdentity(
        dag_id=str(dag_id),
        run_id=str(run_id),
        try_number=try_number if isinstance(try_number, int) else None,
        logical_date=logical_date.isoformat() if logical_date is not None else None,
    )


def run_state_probe(context: Any) -> Callable[[RunIdentity], bool | None]:
    """Whether a DAG run still runs, asked of Airflow through the task's own API (None: cannot tell).

    A run that no longer exists (deleted) does not run. Any other failure to ask is "cannot tell",
    which the claim rule treats as running: it waits, and never takes an input over on a guess.
    """
    ti = context.get("ti") if hasattr(context, "get") else None
    getter = getattr(ti, "get_dagrun_state", None)

    def active(owner: RunIdentity) -> bool | None:
        if getter is None:
            return None
        try:
            state = str(getter(owner.dag_id, owner.run_id)).lower()
        except Exception as exc:  # the API's answer for a missing run is an error, not a state
            text = str(exc).lower().replace(" ", "_")
            return False if "not_found" in text or "404" in text else None
        state = state.rsplit(".", 1)[-1]  # DagRunState.RUNNING -> running
        if state in ("success", "failed"):
            return False
        return True if state in ("queued", "running") else None

    return active
