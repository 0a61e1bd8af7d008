"""The view's pre-filled resolution requests, the tasks' extra link, and the commit task's declared topic
Asset: the rules that decide what a link may offer and which Asset gets an event (no server needed;
the browser pass in tests/system/airflow_scheduler exercises the same through Airflow)."""

from __future__ import annotations

from types import SimpleNamespace
from urllib.parse import parse_qsl, urlsplit

import pytest

from airflow_provider_kafka_eos.ui.resolution import parse_request, request_for, resolve_href


def _row(kind: str, **extra) -> dict:
    return {"transactional_id": "orders-0-7", "kind": kind, "producer_id": 4001, "producer_epoch": 3,
            "manifest_uri": None, **extra}


def test_each_classification_is_offered_only_what_the_safe_design_allows():
    pending = request_for(_row("commit-pending", manifest_uri="file:///m/orders/checkpoint-7.json"))
    assert pending == {"action": "commit-from-manifest", "manifest_uri": "file:///m/orders/checkpoint-7.json",
                       "dry_run": True}
    assert request_for(_row("orphan")) == {"action": "abort", "transactional_id": "orders-0-7",
                                           "producer_id": 4001, "epoch": 3, "dry_run": True}
    assert request_for(_row("foreign")) == {"action": "describe", "transactional_id": "orders-0-7",
                                            "dry_run": True}
    # a live writer's own transaction (writer lease): described, never offered an abort
    assert request_for(_row("writing")) == {"action": "describe", "transactional_id": "orders-0-7",
                                            "dry_run": True}
    assert request_for(_row("something-new")) is None


def test_the_link_round_trips_to_the_same_request():
    conf = request_for(_row("orphan"))
    href = resolve_href("kafka_eos_default", "orphan", conf)
    params = dict(parse_qsl(urlsplit(href).query))
    parsed, actions = parse_request(params["kind"], params)
    assert parsed == conf and actions == ("abort", "describe")


@pytest.mark.parametrize(
    ("kind", "params", "message"),
    [
        ("commit-pending", {"action": "abort", "transactional_id": "t"},
         "action 'abort' is not offered for a commit-pending transaction"),
        ("foreign", {"action": "commit"}, "action 'commit' is not offered for a foreign transaction"),
        ("writing", {"action": "abort", "transactional_id": "t"},
         "action 'abort' is not offered for a writing transaction"),
        ("orphan", {"action": "abort", "epoch": "-1"}, "epoch must be a non-negative integer"),
        ("bogus", {"action": "list"}, "kind 'bogus' is not a classification"),
    ],
)
def test_a_request_the_classification_forbids_is_refused_by_name(kind, params, message):
    with pytest.raises(ValueError, match=message):
        parse_request(kind, params)


def test_the_extra_link_opens_the_tasks_checkpoint_and_is_empty_before_it_is_known():
    from airflow_provider_kafka_eos.ui.links import CheckpointViewLink, remember_checkpoint

    link, operator = CheckpointViewLink(), SimpleNamespace()
    assert link.get_link(operator, ti_key=None) == ""
    remember_checkpoint(operator, "kafka_eos_default", "user_activity", 1764000000000000)
    assert link.get_link(operator, ti_key=None) == (
        "/plugin/kafka-eos-console?conn_id=kafka_eos_default&pipeline_id=user_activity"
        "&checkpoint_id=1764000000000000"
    )


def test_a_declared_topic_asset_keeps_its_outlet_only_for_the_try_that_committed_to_it():
    from airflow.sdk import Asset

    from airflow_provider_kafka_eos.assets.events import settle_declared_topic_assets

    mine, other_topic = Asset("kafka://broker:9092/orders"), Asset("kafka://broker:9092/audit")
    other_cluster, elsewhere = Asset("kafka://old-broker:9092/orders"), Asset("s3://bucket/report")
    operator = SimpleNamespace(outlets=[mine, other_topic, other_cluster, elsewhere])
    settle_declared_topic_assets(operator, "kafka://broker:9092/orders")
    assert operator.outlets == [mine, elsewhere]  # no other topic Asset gets an event from this try
    settle_declared_topic_assets(operator, None)  # a rerun: nothing new visible
    assert operator.outlets == [elsewhere]
