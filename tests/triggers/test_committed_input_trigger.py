"""The committed-input trigger: committed input past the last COMMITTED checkpoint fires it, once;
aborted input and an open transaction fire nothing (the embedded broker, real transactions).

The trigger's filter is driven with the real shared stream (the topic's last stable offsets read
from the broker), made finite: one tick per look, the way the triggerer hands the ticks of its one
poll to every trigger of the group. (Airflow's triggerer process itself is not started here.)
"""

from __future__ import annotations

import asyncio
import json
import pathlib

import pytest
from airflow.sdk.module_loading import import_string
from txn_helpers import connect_admin, produce_in_transaction, set_kafka_eos_connection

from airflow_provider_kafka_eos.kafka.checkpoints.identity import InputRecord
from airflow_provider_kafka_eos.kafka.checkpoints.kafka_input import KafkaInput, PartitionRange
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import Manifest, ManifestStatus
from airflow_provider_kafka_eos.kafka.operations.committed_input import (
    committed_backlog,
    committed_bases,
    lso_snapshot,
)
from airflow_provider_kafka_eos.triggers.committed_input import CommittedInputTrigger
from kafka_eos_testing.embedded import unique_name

DAGS = pathlib.Path(__file__).resolve().parents[2] / "dags"


def _manifest(checkpoint_id: int, status: str, ends: dict[int, int], topic: str = "in") -> Manifest:
    ranges = tuple(PartitionRange(topic, p, 0, end) for p, end in ends.items())
    kafka = KafkaInput(topics=(topic,), group="g", start="earliest", ranges=ranges)
    return Manifest(pipeline_id="p", checkpoint_id=checkpoint_id, transactional_id_prefix="p",
                    naming_strategy="INCREMENTING", topic="out", status=ManifestStatus(status),
                    committables=[], created_at_ms=0, updated_at_ms=0,
                    input=InputRecord(id=f"b{checkpoint_id}", kafka=kafka))


def test_the_base_is_the_newest_committed_checkpoints_to():
    manifests = [_manifest(1, "COMMITTED", {0: 5, 1: 7}), _manifest(2, "COMMITTED", {0: 9}),
                 _manifest(3, "PREPARED", {0: 20, 1: 20}), _manifest(4, "ABORTED", {1: 30})]
    assert committed_bases(manifests, "in") == {0: 9, 1: 7}
    assert committed_bases(manifests, "other") == {}


def test_one_shared_poll_per_cluster_and_topic(monkeypatch):
    set_kafka_eos_connection(monkeypatch, "b1:9092,b2:9092", conn_id="a")
    set_kafka_eos_connection(monkeypatch, "b1:9092", conn_id="b")  # another connection, same cluster
    one = CommittedInputTrigger(kafka_eos_conn_id="a", pipeline_id="p1", input_topic="events")
    two = CommittedInputTrigger(kafka_eos_conn_id="b", pipeline_id="p2", input_topic="events", min_records=5)
    other = CommittedInputTrigger(kafka_eos_conn_id="a", pipeline_id="p3", input_topic="clicks")
    assert one.shared_stream_key() == two.shared_stream_key() != other.shared_stream_key()
    classpath, kwargs = two.serialize()
    kwargs = json.loads(json.dumps(kwargs))
    assert import_string(classpath)(**kwargs).serialize() == (classpath, kwargs)
    with pytest.raises(ValueError, match="min_records must be >= 1"):
        CommittedInputTrigger(kafka_eos_conn_id="a", pipeline_id="p", input_topic="t", min_records=0)


def test_the_example_kafka_input_dag_can_be_started_by_committed_input(airflow_db, monkeypatch):
    """KAFKA_EOS_K2K_SCHEDULE=committed-input: the DAG is scheduled on its input topic's Asset, watched
    by the trigger (what the dag-processor serialises for the triggerer)."""
    from airflow.dag_processing.dagbag import DagBag

    from airflow_provider_kafka_eos.assets.lineage import kafka_asset_uri

    monkeypatch.setenv("KAFKA_EOS_K2K_SCHEDULE", "committed-input")
    monkeypatch.setenv("KAFKA_EOS_K2K_INPUT_TOPIC", "orders")
    monkeypatch.setenv("KAFKA_EOS_K2K_MIN_RECORDS", "50")
    bag = DagBag(dag_folder=str(DAGS / "eos_kafka_to_kafka.py"))
    assert bag.import_errors == {}
    [asset] = bag.get_dag("eos_kafka_to_kafka").timetable.asset_condition.objects
    assert asset.uri == kafka_asset_uri("broker:9092", "orders")
    [watcher] = asset.watchers
    assert isinstance(watcher.trigger, CommittedInputTrigger)
    assert (watcher.trigger.input_topic, watcher.trigger.min_records) == ("orders", 50)


async def _ticks(settings, topic, looks: int):
    for _ in range(looks):
        yield {"stable": await asyncio.to_thread(lso_snapshot, settings, topic)}


def _events(trigger, settings, topic, looks: int) -> list[dict]:
    async def collect():
        return [e.payload async for e in trigger.filter_shared_stream(_ticks(settings, topic, looks))]

    return asyncio.run(asyncio.wait_for(collect(), 60))


@pytest.mark.broker
def test_aborted_and_open_input_fire_nothing_committed_input_fires_once(kafka_broker, monkeypatch, tmp_path):
    conn_id = set_kafka_eos_connection(monkeypatch, kafka_broker.bootstrap, conn_id="committed_input",
                                       manifest_base_uri=(tmp_path / "manifests").as_uri())
    topic, settings = unique_name("input"), {"bootstrap.servers": kafka_broker.bootstrap}
    aborted, still_open, good = (unique_name(k) for k in ("aborted", "open", "good"))
    produce_in_transaction(kafka_broker.bootstrap, aborted, topic, ["a1", "a2", "a3"], commit=False)
    with connect_admin(kafka_broker.bootstrap) as admin:
        admin.abort([aborted])
    trigger = CommittedInputTrigger(kafka_eos_conn_id=conn_id, pipeline_id="k2k", input_topic=topic,
                                    min_records=2, max_wait_s=3600)
    # The aborted transaction moved the LSO past 3 records and its marker: nothing committed waits.
    assert sum(lso_snapshot(settings, topic).values()) == 4
    assert committed_backlog(settings, topic, lso_snapshot(settings, topic), {}).records == 0
    assert _events(trigger, settings, topic, looks=2) == []

    produce_in_transaction(kafka_broker.bootstrap, good, topic, ["c1", "c2"], commit=True)
    produce_in_transaction(kafka_broker.bootstrap, still_open, topic, ["o1", "o2", "o3"], commit=False)
    try:
        # Committed input behind an open transaction is counted up to the LSO only: the 2 committed records.
        # A trigger that fired keeps quiet while its base does not move (its run has not committed).
        [event] = _events(trigger, settings, topic, looks=3)
        assert (event["records"], event["bases"], event["stable"]) == (2, {"0": 0}, {"0": 7})
        # With 3 wanted, the 3 open records do not count: nothing fires.
        fresh = CommittedInputTrigger(kafka_eos_conn_id=conn_id, pipeline_id="k2k", input_topic=topic,
                                      min_records=3, max_wait_s=3600)
        assert _events(fresh, settings, topic, looks=1) == []
        # T seconds: one committed record that has waited long enough fires alone.
        patient = CommittedInputTrigger(kafka_eos_conn_id=conn_id, pipeline_id="k2k", input_topic=topic,
                                        min_records=1000, max_wait_s=0)
        assert [e["records"] for e in _events(patient, settings, topic, looks=1)] == [2]
    finally:
        with connect_admin(kafka_broker.bootstrap) as admin:
            admin.abort([still_open])
