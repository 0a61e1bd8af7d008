"""The sensor's ``input_topics``: someone else's lingering transaction on a pipeline's input topic.

A Kafka-input checkpoint reads up to the last stable offset, so a transaction another application
left open on an input partition stops the pipeline there. A plain confluent-kafka transactional
producer (not this provider's) leaves one open; the sensor's poke and its trigger name it: the
transactional id, producer id and epoch, the partition, since when, and the runbook page. Embedded
broker and Kafka 4.4 (``KAFKA_EOS_TEST_KAFKA=apache``). Ends with a read_committed count of the input.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from airflow_provider_kafka_eos.kafka.admin.input_offsets import read_input_offsets
from airflow_provider_kafka_eos.kafka.operations.scan import Findings
from airflow_provider_kafka_eos.sensors.lingering import KafkaLingeringTransactionSensor
from airflow_provider_kafka_eos.triggers.lingering import LingeringTransactionTrigger
from kafka_eos_testing.embedded import unique_name
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker


def first_event(trigger: LingeringTransactionTrigger, timeout_s: float = 60):
    async def run():
        return await asyncio.wait_for(trigger.run().asend(None), timeout_s)

    return asyncio.run(run())


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    client = AdminClient({"bootstrap.servers": bootstrap})
    for future in client.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10).values():
        future.result(timeout=15)


def _plain(bootstrap: str, topic: str, keys: list[bytes], partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key in keys:
        producer.produce(topic, key=key, value=b"v", partition=partition)
    assert producer.flush(30) == 0


def test_an_input_topic_held_back_by_someone_elses_transaction_is_reported_naming_it(
        kafka_broker, admin, kafka_eos_conn):
    bootstrap = kafka_broker.bootstrap
    topic = unique_name("k2k-input")
    _create_topic(bootstrap, topic, 2)
    before = [f"before-{i}".encode() for i in range(4)]
    _plain(bootstrap, topic, before[:2], 0)
    _plain(bootstrap, topic, before[2:], 1)
    blocker = unique_name("upstream-app")
    upstream = Producer({"bootstrap.servers": bootstrap, "transactional.id": blocker})
    upstream.init_transactions(30)
    upstream.begin_transaction()
    upstream.produce(topic, key=b"pending", value=b"v", partition=0)
    assert upstream.flush(30) == 0  # left open: the upstream application hangs here
    after = [f"after-{i}".encode() for i in range(3)]
    _plain(bootstrap, topic, after, 0)
    try:
        held = admin.describe([blocker])[blocker]
        sensor = KafkaLingeringTransactionSensor(
            task_id=unique_name("input-watch"), prefixes=[unique_name("pipe") + "-"], min_age=0,
            input_topics=f"{topic}, ")  # the submit operator's comma-separated form
        result = sensor.poke({})
        assert result.is_done
        payload = json.loads(json.dumps(result.xcom_value))  # what XCom stores must be plain JSON
        [stall] = Findings.from_dict(payload).lso_stalls
        assert (stall.topic, stall.partition, stall.pipeline_input) == (topic, 0, True)
        assert stall.transactional_id == blocker
        assert (stall.blocking_producer_id, stall.blocking_producer_epoch) == (held.producer_id,
                                                                              held.producer_epoch)
        assert stall.txn_started_ms == held.start_time_ms
        # the pipeline's next range would end exactly there
        assert read_input_offsets(admin, [topic]).stable[(topic, 0)] == stall.last_stable_offset == 2
        for text in (blocker, f"producer {held.producer_id}", f"{topic}-0", "open since",
                     "cannot read past it", "4 record(s) wait behind it"):
            assert text in stall.reason, (text, stall.reason)
        [row] = payload["lso_stalls"]
        assert blocker in row["next_step"] and "input-lag" in row["runbook"]

        # The deferrable path reports the same finding.
        trigger = LingeringTransactionTrigger(kafka_eos_conn_id=kafka_eos_conn,
                                              spec=sensor.scan_spec().to_dict(), poll_interval=1)
        event = first_event(trigger)
        assert event.payload["status"] == "found", event.payload
        [triggered] = Findings.from_dict(event.payload["findings"]).lso_stalls
        assert (triggered.transactional_id, triggered.pipeline_input) == (blocker, True)
    finally:
        upstream.abort_transaction(30)
    # Ended (its abort marker is written after EndTxn answers): nothing holds the input any more, and
    # read_committed readers see every committed record once, the aborted one never.
    deadline = time.monotonic() + 30
    while sensor.poke({}).is_done:
        assert time.monotonic() < deadline, "the input stall was still reported 30 s after the abort"
        time.sleep(0.2)
    assert_exactly_once(count_keys(bootstrap, topic), before + after)
