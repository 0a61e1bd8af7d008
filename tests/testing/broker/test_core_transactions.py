"""Isolation levels over real transactions from a confluent-kafka transactional producer.

Needs the coordinator developer's transaction coordinator; skips (naming it) while it is absent.
"""

from __future__ import annotations

from contextlib import closing

import pytest
from confluent_kafka import Producer
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from kafka_eos_testing.broker.txn_testkit import admin, describe_settled
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.broker, pytest.mark.broker_double, pytest.mark.usefixtures("needs_transactions")]

LATEST, EARLIEST = -1, -2


def list_offset(raw_client, topic: str, timestamp: int, isolation: int) -> int:
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=timestamp
                    )
                ],
            )
        ],
    )
    response = raw_client().request(request, ListOffsetsResponse, 7)
    partition = response.topics[0].partitions[0]
    assert partition.error_code == 0
    return partition.offset


def transactional_producer(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5}
    )
    producer.init_transactions(30)
    return producer


def produce_in_transaction(producer: Producer, topic: str, keys: list[bytes]) -> None:
    producer.begin_transaction()
    for key in keys:
        producer.produce(topic, key=key, value=b"v")
    assert producer.flush(30) == 0  # on the broker, inside the still-open transaction


def test_open_transaction_is_invisible_to_read_committed_and_pins_the_lso(
    kafka_broker, unique_name, raw_client
):
    topic, transactional_id = unique_name("isolation"), unique_name("txn")
    producer = transactional_producer(kafka_broker.bootstrap, transactional_id)
    committed = [f"committed-{i}".encode() for i in range(100)]
    pending = [f"pending-{i}".encode() for i in range(30)]
    produce_in_transaction(producer, topic, committed)
    producer.commit_transaction(30)
    produce_in_transaction(producer, topic, pending)

    # 100 records + 1 commit marker precede the open transaction: the LSO stays at its first offset
    assert list_offset(raw_client, topic, LATEST, isolation=1) == 101
    assert list_offset(raw_client, topic, LATEST, isolation=0) == 131
    assert list_offset(raw_client, topic, EARLIEST, isolation=1) == 0
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic, timeout_s=20), committed)
    assert_exactly_once(
        count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted", timeout_s=20),
        committed + pending,
    )

    producer.commit_transaction(30)
    with closing(admin(kafka_broker.bootstrap)) as kafka_admin:  # Kafka writes markers after EndTxn
        describe_settled(kafka_admin, transactional_id)
    assert list_offset(raw_client, topic, LATEST, isolation=1) == 132  # past the second marker
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic, timeout_s=20), committed + pending)


def test_aborted_records_are_dropped_for_read_committed_only(kafka_broker, unique_name):
    topic = unique_name("aborted")
    producer = transactional_producer(kafka_broker.bootstrap, unique_name("txn"))
    aborted = [f"aborted-{i}".encode() for i in range(50)]
    kept = [f"kept-{i}".encode() for i in range(20)]
    produce_in_transaction(producer, topic, aborted)
    producer.abort_transaction(30)
    produce_in_transaction(producer, topic, kept)
    producer.commit_transaction(30)

    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic, timeout_s=20), kept)
    # read_uncommitted consumers see aborted records too, exactly as on Kafka
    assert_exactly_once(
        count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted", timeout_s=20), aborted + kept
    )


def test_fetch_lists_aborted_transactions_for_read_committed_only(kafka_broker, unique_name, raw_client):
    from kafka.protocol.consumer import FetchRequest, FetchResponse

    topic, transactional_id = unique_name("aborted-index"), unique_name("txn")
    producer = transactional_producer(kafka_broker.bootstrap, transactional_id)
    produce_in_transaction(producer, topic, [b"x1", b"x2", b"x3"])
    producer.abort_transaction(30)  # offsets 0-2 data, 3 abort marker
    with closing(admin(kafka_broker.bootstrap)) as kafka_admin:  # Kafka writes markers after EndTxn
        describe_settled(kafka_admin, transactional_id)

    def fetch(isolation: int):
        fetch_topic = FetchRequest.FetchTopic
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=isolation,
            session_id=0,
            session_epoch=-1,
            forgotten_topics_data=[],
            rack_id="",
            topics=[
                fetch_topic(
                    topic=topic,
                    partitions=[
                        fetch_topic.FetchPartition(
                            partition=0,
                            current_leader_epoch=-1,
                            fetch_offset=0,
                            log_start_offset=-1,
                            partition_max_bytes=1 << 20,
                        )
                    ],
                )
            ],
        )
        return raw_client().request(request, FetchResponse, 11).responses[0].partitions[0]

    committed_view, uncommitted_view = fetch(1), fetch(0)
    assert [(a.producer_id >= 0, a.first_offset) for a in committed_view.aborted_transactions] == [(True, 0)]
    assert uncommitted_view.aborted_transactions is None
    for view in (committed_view, uncommitted_view):
        assert (view.high_watermark, view.last_stable_offset) == (4, 4)
        assert view.records  # data and the marker are returned; the client drops what was aborted
