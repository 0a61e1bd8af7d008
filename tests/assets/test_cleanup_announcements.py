"""What the cleanup DAG announces for the checkpoints it commits (``announce_settled_checkpoints``).

Airflow's own outlet-event accessors record the events; the one thing replaced is the question to
the task's supervisor whether a DAG declares the topic's Asset (no supervisor runs in a unit test).
The whole path on Airflow's database, with eos_downstream queued for the batch, is
tests/system/dags/test_cleanup_dag.py.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from airflow_provider_kafka_eos.assets import events as asset_events
from airflow_provider_kafka_eos.assets.events import (
    COMMITTED_ALIAS,
    announce_settled_checkpoints,
    checkpoints_named,
)
from airflow_provider_kafka_eos.assets.lineage import kafka_asset_uri

BOOTSTRAP = "broker-1:9092"


def _report(cid: int, batch: str, *, status: str = "committed", records: int = 3, topic: str = "t") -> dict:
    return {"status": status, "pipeline_id": "p", "checkpoint_id": cid, "records": records, "topic": topic,
            "input_id": batch, "transactions": 1, "manifest_uri": f"file:///m/{cid}.json"}


def _context() -> dict:
    from airflow.sdk.execution_time.context import OutletEventAccessors

    return {"outlet_events": OutletEventAccessors(), "ti": SimpleNamespace(task=SimpleNamespace(outlets=[]))}


@pytest.fixture
def declared(monkeypatch):
    """Every topic's Asset is declared by some DAG (Airflow knows it as active)."""
    from airflow.sdk import Asset

    monkeypatch.setattr(asset_events, "_declared_somewhere", lambda uri: Asset(uri))


def test_two_checkpoints_of_one_topic_share_the_extra_and_get_a_key_each(declared):
    from airflow.sdk import Asset

    context = _context()
    reports = [_report(1, "b1"), _report(2, "b2"), _report(3, "b3", status="already_committed"),
               _report(4, "b4", records=0), _report(5, "b5", status="would_commit")]

    uris = announce_settled_checkpoints(context, bootstrap_servers=BOOTSTRAP, reports=reports)

    uri = kafka_asset_uri(BOOTSTRAP, "t")
    assert uris == [uri] and context["ti"].task.outlets == [Asset(uri)]
    accessor = context["outlet_events"][Asset(uri)]
    assert accessor.partition_keys == {"b1", "b2"}  # not what was found committed, empty or a dry run
    assert checkpoints_named(accessor.extra) == {("p", 1), ("p", 2)}


def test_one_checkpoint_keeps_the_commit_tasks_extra(declared):
    from airflow.sdk import Asset

    context = _context()
    announce_settled_checkpoints(context, bootstrap_servers=BOOTSTRAP, reports=[_report(7, "b7")])

    extra = context["outlet_events"][Asset(kafka_asset_uri(BOOTSTRAP, "t"))].extra
    assert (extra["checkpoint_id"], extra["partition_key"], extra["records"]) == (7, "b7", 3)
    assert checkpoints_named(extra) == {("p", 7)}


def test_a_topic_no_dag_declares_goes_through_the_alias(monkeypatch):
    monkeypatch.setattr(asset_events, "_declared_somewhere", lambda uri: None)
    from airflow.sdk import AssetAlias

    context = _context()
    reports = [_report(1, "b1"), _report(2, "b2")]
    announce_settled_checkpoints(context, bootstrap_servers=BOOTSTRAP, reports=reports)

    assert context["ti"].task.outlets == [AssetAlias(name=COMMITTED_ALIAS)]
    added = context["outlet_events"][AssetAlias(name=COMMITTED_ALIAS)].asset_alias_events
    assert [e.extra["checkpoint_id"] for e in added] == [1, 2]


def test_nothing_made_visible_announces_nothing(declared):
    context = _context()
    reports = [_report(1, "b1", status="already_committed"), _report(2, "b2", records=0)]
    assert announce_settled_checkpoints(context, bootstrap_servers=BOOTSTRAP, reports=reports) == []
    assert context["ti"].task.outlets == [] and not context["outlet_events"]._dict
