"""The same batch triggered twice by hand is written once; a reprocess writes it again, on record.

The example pipeline DAG as shipped (dag.test() on SQLite, spark-submit in local mode, the
embedded broker). Two manual runs of batch B1, as the UI's trigger form makes them: each gets a
new logical date ("now"), so each gets its own checkpoint id; only the input identity (the batch)
says they read the same data. Before input identities, both runs were green and a
read_committed consumer counted every key twice. The real-scheduler version (CLI, REST API with
and without a logical date, two runs at once) is the third test of
tests/system/airflow_scheduler/test_real_scheduler.py.
"""

from __future__ import annotations

import pathlib
import sys
from datetime import datetime, timedelta, timezone

import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, find_manifests
from airflow_provider_kafka_eos.operators.submit import XCOM_CHECKPOINT_KEY
from kafka_eos_testing.verify import assert_exactly_once, count_keys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "dags"))
from eos_sample_events import write_batch
from test_pipeline import _states, asset_events, connections, pipeline_dag  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.dag, pytest.mark.spark, pytest.mark.broker, pytest.mark.provider_logic]


def _xcom(run, task_id="submit"):
    ti = next(t for t in run.get_task_instances() if t.task_id == task_id)
    return ti.xcom_pull(task_ids=task_id, key=XCOM_CHECKPOINT_KEY)


def test_a_batch_triggered_twice_is_written_once_and_a_reprocess_writes_it_again_on_record(
    pipeline_dag, connections, kafka_broker, tmp_path, unique_name, capfd  # noqa: F811
):
    dag, topic = pipeline_dag, unique_name("per-user")
    conf = {
        "pipeline_id": unique_name("dupe").replace("-", "_"),
        "topic": topic,
        "input_dir": str(tmp_path / "input"),
        "manifest_base_uri": (tmp_path / "manifests").as_uri(),
        "spark_partitions": 2,
        "batch": "20260301T100000",
    }
    expected = write_batch(conf["input_dir"], conf["batch"], users=30)
    first_at = datetime(2026, 3, 1, 10, 5, tzinfo=timezone.utc)

    first = dag.test(logical_date=first_at, run_conf=conf)
    first_id, first_states = first.run_id, _states(first)
    assert first_states == {"preflight": "success", "submit": "success", "commit": "success"}
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)

    # The trigger form again a minute later: a new logical date, the same batch.
    second = dag.test(logical_date=first_at + timedelta(minutes=1), run_conf=conf)
    assert _states(second) == {"preflight": "success", "submit": "skipped", "commit": "skipped"}
    result = _xcom(second)
    assert result["outcome"] == "duplicate_input" and result["prepared_by"]["run_id"] == first_id
    assert f"input '20260301T100000' was already written by run '{first_id}'" in result["message"]
    assert "committed at" in result["message"] and "nothing written" in result["message"]
    assert f"was already written by run '{first_id}'" in capfd.readouterr().out  # the task log says it
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)
    [manifest] = [m for _, m in find_manifests(conf["manifest_base_uri"], conf["pipeline_id"])]
    assert manifest.input.id == conf["batch"] and manifest.input.reprocess_of is None
    assert len(asset_events(f"kafka://{kafka_broker.bootstrap.split(',')[0]}/{topic}")) == 1  # no 2nd event

    # A deliberate reprocess (the corrected batch): written again, and the manifest says so.
    third = dag.test(logical_date=first_at + timedelta(minutes=2), run_conf={**conf, "reprocess": True})
    assert _states(third) == {"preflight": "success", "submit": "success", "commit": "success"}
    manifests = [m for _, m in find_manifests(conf["manifest_base_uri"], conf["pipeline_id"])]
    assert [(m.status, m.input.id, m.input.reprocess_of) for m in manifests] == [
        (ManifestStatus.COMMITTED, conf["batch"], None),
        (ManifestStatus.COMMITTED, conf["batch"], manifest.checkpoint_id),
    ]
    counts = count_keys(kafka_broker.bootstrap, topic)
    assert counts == {key.encode(): 2 for key in expected}  # each key once per write, asked for twice
