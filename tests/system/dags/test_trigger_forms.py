"""The trigger forms of the three example DAGs, as Airflow serializes them for the UI.

Each DAG is loaded with Airflow's DagBag from its file and its params are read from the serialized
DAG (what the API server hands the "Trigger" form), so a param the form would show as a bare
snake_case name without help fails here.
"""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.naming import incrementing_id
from airflow_provider_kafka_eos.kafka.operations.classify import under_prefixes

pytestmark = [pytest.mark.dag, pytest.mark.usefixtures("airflow_db")]

DAGS = pathlib.Path(__file__).resolve().parents[3] / "dags"
FORMS = {"eos_pipeline": "eos_pipeline.py", "eos_cleanup": "eos_cleanup.py",
         "eos_manual_resolution": "eos_manual_resolution.py"}


def _serialized_params(dag_id: str) -> dict:
    from airflow.dag_processing.dagbag import DagBag
    from airflow.serialization.serialized_objects import DagSerialization

    bag = DagBag(dag_folder=str(DAGS / FORMS[dag_id]))
    assert bag.import_errors == {}
    # The round trip the API server makes: the stored serialized DAG, its params as the form gets them.
    dag = DagSerialization.from_dict(DagSerialization.to_dict(bag.get_dag(dag_id)))
    return {name: param.dump() for name, param in dag.params.items()}  # as DAGDetailsResponse does


@pytest.mark.parametrize("dag_id", sorted(FORMS))
def test_every_param_has_a_title_and_a_description(dag_id):
    params = _serialized_params(dag_id)
    assert params
    for name, param in params.items():
        schema = param["schema"]
        assert schema.get("title") and schema["title"] != name, f"{dag_id}.{name}: no title"
        description = param.get("description") or ""
        assert len(description) >= 15, f"{dag_id}.{name}: no description"


def test_fixed_values_are_enums():
    cleanup = _serialized_params("eos_cleanup")
    assert cleanup["commit_pending_action"]["schema"]["enum"] == ["commit", "alert"]
    assert set(cleanup["commit_pending_action"]["schema"]["values_display"]) == {"commit", "alert"}
    assert "One per line" in cleanup["prefixes"]["description"]
    assert cleanup["prefixes"]["schema"]["type"] == "array"
    resolution = _serialized_params("eos_manual_resolution")
    assert resolution["action"]["schema"]["enum"][0] == "list"
    assert resolution["dry_run"]["value"] is True  # the form only reports until the person unticks it


def _load(file: str, name: str):
    spec = importlib.util.spec_from_file_location(name, DAGS / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("pipeline_id", [None, "orders_eu"])
def test_the_cleanup_watches_the_example_pipeline_out_of_the_box(monkeypatch, pipeline_id):
    """Before: the cleanup's default prefix was ``eos-``; the pipeline's ids are ``user_activity-0-...``."""
    monkeypatch.delenv("KAFKA_EOS_CLEANUP_PREFIXES", raising=False)
    if pipeline_id is None:
        monkeypatch.delenv("KAFKA_EOS_PIPELINE_ID", raising=False)
    else:
        monkeypatch.setenv("KAFKA_EOS_PIPELINE_ID", pipeline_id)
    pipeline = _load("eos_pipeline.py", "eos_pipeline_form_check")
    cleanup = _load("eos_cleanup.py", "eos_cleanup_form_check")
    assert (pipeline_id or "user_activity") == pipeline.PIPELINE_ID
    ids = [incrementing_id(pipeline.PIPELINE_ID, partition, 1_767_225_600_000_000) for partition in (0, 7)]
    assert all(under_prefixes(tid, cleanup.DEFAULT_PREFIXES) for tid in ids), (ids, cleanup.DEFAULT_PREFIXES)
    # ... and only them: another pipeline whose id merely starts the same is not ours.
    assert not under_prefixes(incrementing_id(pipeline.PIPELINE_ID + "2", 0, 1), cleanup.DEFAULT_PREFIXES)
