"""The deferrable path: trigger serialisation, events from ``run()``, ``execute_complete``."""

from __future__ import annotations

import json

import pytest
from airflow.sdk.exceptions import TaskDeferred
from airflow.sdk.module_loading import import_string
from txn_helpers import first_event, produce_in_transaction, set_kafka_eos_connection

from airflow_provider_kafka_eos.kafka.errors import BrokerUnreachableError, ConfigError
from airflow_provider_kafka_eos.kafka.operations.scan import Findings, ScanSpec
from airflow_provider_kafka_eos.sensors.lingering import KafkaLingeringTransactionSensor
from airflow_provider_kafka_eos.triggers.lingering import LingeringTransactionTrigger
from kafka_eos_testing.embedded import unique_name

SECRET = "s3cr3t-never-serialised"


def test_serialisation_round_trip_is_json_and_holds_no_secret():
    trigger = LingeringTransactionTrigger(
        kafka_eos_conn_id="kafka_eos_default",
        spec=ScanSpec(
            min_age_ms=5000, prefixes=("a-",), manifest_base_uri="file:///m", lso_partitions=("t",)
        ).to_dict(),
        poll_interval=7,
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_provider_kafka_eos.triggers.lingering.LingeringTransactionTrigger"
    kwargs = json.loads(json.dumps(kwargs))
    again = import_string(classpath)(**kwargs)
    assert again.serialize() == (classpath, kwargs)
    assert ScanSpec.from_dict(kwargs["spec"]).prefixes == ("a-",)


@pytest.mark.broker
def test_deferrable_sensor_defers_with_the_connection_id_only(kafka_broker, monkeypatch, empty_store):
    """Nothing lingers: the first poke is empty, so the sensor defers; the trigger carries no secret."""
    conn_id = "eos_deferred"
    monkeypatch.setenv(  # a connection with a password: it may live in the hook, never in the trigger
        "AIRFLOW_CONN_EOS_DEFERRED",
        json.dumps(
            {
                "conn_type": "kafka_eos",
                "extra": {"bootstrap.servers": kafka_broker.bootstrap, "manifest_base_uri": empty_store},
                "password": SECRET,
            }
        ),
    )
    sensor = KafkaLingeringTransactionSensor(
        task_id="defer",
        kafka_eos_conn_id=conn_id,
        prefixes=[unique_name("nothing")],
        min_age=0,
        deferrable=True,
        poke_interval=5,
        timeout=60,
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    assert deferred.value.method_name == "execute_complete"
    _, kwargs = deferred.value.trigger.serialize()
    assert kwargs["kafka_eos_conn_id"] == conn_id
    assert SECRET not in json.dumps(kwargs)


@pytest.mark.broker
def test_trigger_fires_with_findings_and_execute_complete_returns_them(
    kafka_broker, monkeypatch, empty_store
):
    conn_id = set_kafka_eos_connection(
        monkeypatch, kafka_broker.bootstrap, conn_id="eos_trigger", manifest_base_uri=empty_store
    )
    prefix, topic = unique_name("trig") + "-", unique_name("topic")
    produce_in_transaction(kafka_broker.bootstrap, f"{prefix}0", topic, ["k"], commit=False)
    trigger = LingeringTransactionTrigger(
        kafka_eos_conn_id=conn_id,
        spec=ScanSpec(min_age_ms=0, prefixes=(prefix,)).to_dict(),
        poll_interval=0.2,
    )
    event = first_event(trigger)
    assert event.payload["status"] == "found"
    sensor = KafkaLingeringTransactionSensor(
        task_id="resume", kafka_eos_conn_id=conn_id, prefixes=[prefix], min_age=0, deferrable=True
    )
    # Deferrable mode pokes once first: with a finding already there it returns without deferring.
    assert Findings.from_dict(sensor.execute({})).counts()["orphan"] == 1
    returned = sensor.execute_complete({}, event.payload)
    assert [(f.transactional_id, f.kind.value) for f in Findings.from_dict(returned).transactions] == [
        (f"{prefix}0", "orphan")
    ]


def test_trigger_reports_an_unreachable_broker_and_execute_complete_raises_it(monkeypatch):
    conn_id = set_kafka_eos_connection(monkeypatch, "127.0.0.1:1", conn_id="eos_unreachable")
    trigger = LingeringTransactionTrigger(
        kafka_eos_conn_id=conn_id, spec=ScanSpec(min_age_ms=0, prefixes=("x-",)).to_dict(), poll_interval=0.2
    )
    event = first_event(trigger)
    assert event.payload["status"] == "error"
    assert event.payload["error_type"] == "BrokerUnreachableError"
    sensor = KafkaLingeringTransactionSensor(task_id="resume", kafka_eos_conn_id=conn_id)
    with pytest.raises(BrokerUnreachableError) as raised:
        sensor.execute_complete({}, event.payload)
    assert "Next step: kafka-eos-txn runbook broker-unreachable (" in str(raised.value)


def test_execute_complete_rebuilds_our_error_class_and_rejects_a_missing_event():
    sensor = KafkaLingeringTransactionSensor(task_id="resume")
    event = {
        "status": "error",
        "error_type": "ConfigError",
        "cause": "bad key 'x'",
        "runbook": "configuration",
    }
    with pytest.raises(
        ConfigError, match=r"bad key 'x'\. Next step: kafka-eos-txn runbook configuration \("
    ):
        sensor.execute_complete({}, event)
    with pytest.raises(Exception, match="sent no event"):
        sensor.execute_complete({}, None)
