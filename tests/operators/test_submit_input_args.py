"""The submit operator's input-identity arguments, at the edge: parsed and refused before any write.

Airflow's task API (``ti.get_dagrun_state``) is replaced by a stand-in here: the real call needs a
running API server, and the real-scheduler test (tests/system/airflow_scheduler/test_real_scheduler.py)
exercises it, including a run Airflow no longer knows.
"""

from __future__ import annotations

import pathlib

import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.identity import RunIdentity
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
from airflow_provider_kafka_eos.kafka.errors import UsageError
from airflow_provider_kafka_eos.kafka.validation import validate_flag
from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator
from airflow_provider_kafka_eos.tasks.dag_run import run_state_probe

RUN = RunIdentity("eos_pipeline", "manual__a", 1, None)


@pytest.mark.parametrize(("value", "expected"), [
    (True, True), (False, False), ("True", True), ("true", True), ("1", True), ("False", False),
    ("false", False), ("", False), (None, False), ("None", False),
])
def test_reprocess_reads_a_rendered_flag(value, expected):
    assert validate_flag(value, field="reprocess") is expected


def test_reprocess_refuses_anything_else_by_name():
    with pytest.raises(UsageError, match=r"reprocess must be true or false, got 'sometimes'"):
        validate_flag("sometimes", field="reprocess")


class _TaskInstance:
    def __init__(self, answer):
        self.answer = answer

    def get_dagrun_state(self, dag_id, run_id):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(("answer", "active"), [
    ("running", True), ("queued", True), ("DagRunState.RUNNING", True), ("success", False), ("failed", False),
    (RuntimeError("API error: DAGRUN_NOT_FOUND"), False), (RuntimeError("404 Not Found"), False),
    (RuntimeError("connection refused"), None), ("upstream_weird", None),
])
def test_whether_a_claiming_run_still_runs_comes_from_airflow_and_doubt_counts_as_running(answer, active):
    assert run_state_probe({"ti": _TaskInstance(answer)})(RUN) is active
    assert run_state_probe({})(RUN) is None  # outside a task: cannot tell


@pytest.mark.parametrize("input_id", ["", "   ", "x" * 2000, "a\tb"])
def test_a_bad_input_id_is_refused_before_the_store_is_touched(tmp_path, input_id):
    with pytest.raises(UsageError, match="input_id"):  # the first door: the DAG does not load
        SparkEosSubmitOperator(task_id="submit", pipeline_id="orders", topic="out",
                               application_callable="m:f", input_id=input_id)
    op = SparkEosSubmitOperator(task_id="submit", pipeline_id="orders", topic="out",
                                application_callable="m:f", input_id="{{ params.batch }}")
    op.input_id = input_id  # as rendered
    store = ManifestStore.configured(str(tmp_path / "store"))
    with pytest.raises(UsageError, match="input_id"):
        op._claim_input({}, store, 5, RUN)
    assert not pathlib.Path(store.base_uri).exists()
