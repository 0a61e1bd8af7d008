"""Empty input is never a silent green run of dags/eos_pipeline.py (docs/ui.md, "Empty input").

``run_batch`` (rendered by the submit task before spark-submit starts) is called directly for
the outcome and its words; then the real DAG runs with ``dag.test()`` on SQLite against the
embedded broker to show the task states a user sees. No Spark job starts in any of these cases,
which is the point: nothing is prepared for a batch without input.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys
from types import SimpleNamespace

import pendulum
import pytest
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import find_manifests

DAGS = pathlib.Path(__file__).resolve().parents[3] / "dags"
sys.path.insert(0, str(DAGS))
from eos_sample_events import write_batch  # noqa: E402

RUN_TIME = pendulum.datetime(2026, 3, 2, 9, 30, 15, tz="UTC")
DERIVED = "20260302T093015"


@pytest.fixture(scope="module")
def pipeline_module():
    spec = importlib.util.spec_from_file_location("eos_pipeline_empty_input", DAGS / "eos_pipeline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(**fields):
    return SimpleNamespace(data_interval_end=None, run_after=RUN_TIME, **fields)


def test_a_batch_with_input_is_returned(pipeline_module, tmp_path):
    write_batch(tmp_path, DERIVED, users=3)
    write_batch(tmp_path, "by-hand", users=3)
    assert pipeline_module.run_batch(_run(), {"input_dir": str(tmp_path)}) == DERIVED
    by_hand = {"input_dir": tmp_path.as_uri(), "batch": " by-hand "}
    assert pipeline_module.run_batch(_run(), by_hand) == "by-hand"


def test_a_derived_batch_without_a_folder_is_skipped_with_the_reason(pipeline_module, tmp_path):
    with pytest.raises(AirflowSkipException) as skip:
        pipeline_module.run_batch(_run(), {"input_dir": str(tmp_path), "batch": ""})
    assert str(skip.value) == (
        f"batch '{DERIVED}' has no input: {tmp_path / DERIVED} does not exist; "
        "nothing to write, no checkpoint prepared"
    )


def test_a_batch_folder_without_event_files_is_skipped_either_way(pipeline_module, tmp_path):
    (tmp_path / "by-hand").mkdir()
    (tmp_path / "by-hand" / "_SUCCESS").write_text("")
    with pytest.raises(AirflowSkipException) as skip:
        pipeline_module.run_batch(_run(), {"input_dir": str(tmp_path), "batch": "by-hand"})
    assert "holds no event file" in str(skip.value)


def test_a_batch_typed_by_hand_without_a_folder_is_a_named_failure(pipeline_module, tmp_path):
    with pytest.raises(AirflowFailException) as fail:
        pipeline_module.run_batch(_run(), {"input_dir": str(tmp_path), "batch": "2026030T1000"})
    message = str(fail.value)
    assert f"batch '2026030T1000' has no input: {tmp_path / '2026030T1000'} does not exist" in message
    assert "Nothing was submitted" in message and "check the Batch param" in message


def test_a_missing_input_folder_is_a_named_failure(pipeline_module, tmp_path):
    with pytest.raises(AirflowFailException) as fail:
        pipeline_module.run_batch(_run(), {"input_dir": str(tmp_path / "nope")})
    assert f"input_dir {tmp_path / 'nope'} does not exist" in str(fail.value)


# -- the DAG as a user runs it ---------------------------------------------------------------


@pytest.fixture
def pipeline_dag(airflow_db, kafka_broker, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_EOS_DEFAULT",
                       json.dumps({"conn_type": "kafka_eos", "extra": kafka_broker.client_config()}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    bag = DagBag(dag_folder=str(DAGS / "eos_pipeline.py"))
    assert bag.import_errors == {}
    return bag.get_dag("eos_pipeline")


def _conf(tmp_path, unique_name, **extra):
    return {"pipeline_id": unique_name("empty").replace("-", "_"), "topic": unique_name("per-user"),
            "input_dir": str(tmp_path / "input"), "manifest_base_uri": (tmp_path / "manifests").as_uri(),
            **extra}


def _states(run) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


@pytest.mark.dag
@pytest.mark.broker
@pytest.mark.provider_logic  # the DAG's input rules: no Spark job starts, nothing reaches Kafka
def test_the_dag_skips_a_run_without_input_and_fails_a_mistyped_batch(pipeline_dag, tmp_path, unique_name):
    (tmp_path / "input").mkdir()
    conf = _conf(tmp_path, unique_name)

    empty = pipeline_dag.test(logical_date=None, run_after=RUN_TIME, run_conf=conf)
    assert _states(empty) == {"preflight": "success", "submit": "skipped", "commit": "skipped"}

    typo = pipeline_dag.test(logical_date=None, run_after=RUN_TIME.add(minutes=1),
                             run_conf={**conf, "batch": "no-such-batch"})
    assert _states(typo) == {"preflight": "success", "submit": "failed", "commit": "upstream_failed"}
    submit = next(ti for ti in typo.get_task_instances() if ti.task_id == "submit")
    assert submit.try_number == 1  # failed at once, no retry spent on a typo (retries=2)
    assert not (tmp_path / "manifests").exists() or find_manifests(conf["manifest_base_uri"]) == []
