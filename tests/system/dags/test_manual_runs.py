"""One checkpoint per run, through the example pipeline DAG (dag.test() on SQLite, spark-submit in
local mode, the embedded broker): manual runs triggered within one second, a retried and a
cleared run. (A backfill of an older interval after a newer checkpoint: tests/system/dags/test_pipeline.py
runs its two dated runs newest first.)

Before checkpoint ids had microsecond precision, two manual runs triggered within one second
shared a checkpoint: the second run's job found the first run's COMMITTED manifest, wrote
nothing, and every task succeeded. Every test ends with a read_committed consumer counting
keys: each expected key exactly once, nothing else.
"""

from __future__ import annotations

import pathlib
import sys
from datetime import datetime, timedelta, timezone

import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.identity import checkpoint_id_from_datetime
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, find_manifests
from airflow_provider_kafka_eos.operators.submit import XCOM_CHECKPOINT_KEY
from kafka_eos_testing import fault_job
from kafka_eos_testing.verify import assert_exactly_once, count_keys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "dags"))
from eos_sample_events import write_batch
from test_pipeline import _states, asset_events, connections, pipeline_dag  # noqa: F401  (fixtures)

# Checkpoint ids per run: Airflow's side (one broker proves it).
pytestmark = [pytest.mark.dag, pytest.mark.spark, pytest.mark.broker, pytest.mark.provider_logic]

ALL_SUCCESS = {"preflight": "success", "submit": "success", "commit": "success"}


@pytest.fixture
def conf(tmp_path, unique_name):
    return {
        "pipeline_id": unique_name("manual").replace("-", "_"),
        "topic": unique_name("per-user"),
        "input_dir": str(tmp_path / "input"),
        "manifest_base_uri": (tmp_path / "manifests").as_uri(),
        "spark_partitions": 2,
    }


def _xcom(run, task_id="submit", key=XCOM_CHECKPOINT_KEY):
    ti = next(t for t in run.get_task_instances() if t.task_id == task_id)
    return ti.xcom_pull(task_ids=task_id, key=key)


def _total_written(bootstrap, topic):
    return sum(count_keys(bootstrap, topic, isolation="read_uncommitted").values())


def test_two_manual_runs_within_one_second_are_written_once_and_a_retry_and_a_clear_write_nothing(
    pipeline_dag, connections, kafka_broker, conf  # noqa: F811
):
    """Run A, then run B 600 ms later with a different input. B's submit task dies right after
    its manifest was written (spark-submit fails although the checkpoint is prepared) and is
    retried: try 2 finds its own manifest and writes nothing. Then B is cleared and rerun."""
    dag, topic = pipeline_dag, conf["topic"]  # the example DAG as shipped: its `batch` Param picks the input
    expected = write_batch(conf["input_dir"], "manual-a", users=40)
    expected += write_batch(conf["input_dir"], "manual-b", users=50)  # a different input
    a_at = datetime(2026, 4, 1, 9, 30, 0, 100_000, tzinfo=timezone.utc)
    b_at = a_at + timedelta(milliseconds=600)  # the same second: one checkpoint id before the fix

    run_a = dag.test(run_after=a_at, logical_date=None, run_conf={**conf, "batch": "manual-a"})
    # Read now: dag.test() deletes earlier runs without a logical date when it creates the next.
    a_id, a_states, a_outcome = run_a.run_id, _states(run_a), _xcom(run_a)["outcome"]
    submit = dag.get_task("submit")
    saved = submit.application, submit.env_vars, submit.retry_delay
    submit.application = fault_job.FILE  # the job with a fault plan from KAFKA_EOS_FAULT (tests only)
    submit.env_vars = {fault_job.ENV_VAR: "{{ 'exit_after_manifest' if ti.try_number == 1 else '' }}"}
    submit.retry_delay = timedelta(0)
    try:
        run_b = dag.test(run_after=b_at, logical_date=None, run_conf={**conf, "batch": "manual-b"})
    finally:
        submit.application, submit.env_vars, submit.retry_delay = saved

    assert (a_states, a_outcome) == (ALL_SUCCESS, "prepared")
    assert _states(run_b) == ALL_SUCCESS
    assert next(t for t in run_b.get_task_instances() if t.task_id == "submit").try_number == 2
    b_result = _xcom(run_b)
    assert b_result["outcome"] == "same_run" and b_result["prepared_by"]["try_number"] == 1
    manifests = [m for _, m in find_manifests(conf["manifest_base_uri"], conf["pipeline_id"])]
    assert [m.checkpoint_id for m in manifests] == [checkpoint_id_from_datetime(a_at),
                                                     checkpoint_id_from_datetime(b_at)]
    assert [m.status for m in manifests] == [ManifestStatus.COMMITTED] * 2
    assert [m.prepared_by.run_id for m in manifests] == [a_id, run_b.run_id]
    written = _total_written(kafka_broker.bootstrap, topic)
    assert written == len(expected)  # the retry wrote nothing
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)

    asset_uri = f"kafka://{kafka_broker.bootstrap.split(',')[0]}/{topic}"
    assert [e["checkpoint_id"] for e in asset_events(asset_uri)] == [m.checkpoint_id for m in manifests]

    _clear_and_rerun(dag, run_b.run_id)  # the same run, cleared: same checkpoint, nothing written

    assert _total_written(kafka_broker.bootstrap, topic) == written
    # Its commit task found the manifest COMMITTED and Airflow's event for it: no second event.
    assert [e["checkpoint_id"] for e in asset_events(asset_uri)] == [m.checkpoint_id for m in manifests]
    assert len(find_manifests(conf["manifest_base_uri"], conf["pipeline_id"])) == 2
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)


def _clear_and_rerun(dag, run_id: str) -> None:
    """Clear every task of an existing run and run it again, as the scheduler would after a clear.

    dag.test() cannot do this: it deletes and re-creates the run (a new run id). This is dag.test's
    own minimal loop (``airflow.sdk.definitions.dag._run_task``, a private helper: the boundary we
    cannot cross without a scheduler) over the cleared run, which keeps its run id, logical date
    and run_after, as a clear from the UI does.
    """
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import clear_task_instances
    from airflow.sdk.definitions.dag import _run_task
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState, TaskInstanceState
    from sqlalchemy import select

    with create_session() as session:
        dr = session.scalar(select(DagRun).where(DagRun.dag_id == dag.dag_id, DagRun.run_id == run_id))
        clear_task_instances(list(dr.get_task_instances(session=session)), session,
                             dag_run_state=DagRunState.RUNNING)
        session.commit()
        dr.dag = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
        for _ in range(20):  # three tasks: a handful of rounds; bounded, never a hang
            if dr.state != DagRunState.RUNNING:
                break
            session.expire_all()
            schedulable, _ = dr.update_state(session=session)
            for ti in schedulable:
                ti.try_number += 1
                ti.state = TaskInstanceState.SCHEDULED
            session.commit()
            for ti in [t for t in dr.get_task_instances(session=session)
                       if t.state == TaskInstanceState.SCHEDULED]:
                _run_task(ti=ti, task=dag.task_dict[ti.task_id])
        assert dr.state == DagRunState.SUCCESS, dr.state
        states = {ti.task_id: str(ti.state) for ti in dr.get_task_instances(session=session)}
        assert states == ALL_SUCCESS, states

