"""Consumer groups: librdkafka subscribe() with manual and auto commits, kafka-python groups, rebalance."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [pytest.mark.broker, pytest.mark.broker_double]


def make_topic(bootstrap: str, topic: str, partitions: int, keys: list[bytes]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for key in keys:
        producer.produce(topic, key=key, value=b"v")
    assert producer.flush(30) == 0


def consume(consumer: Consumer, count: int, timeout_s: float = 30.0) -> list[bytes]:
    seen: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(seen) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert message.error() is None, message.error()
        seen.append(message.key())
    return seen


def group_consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            **extra,
        }
    )


def test_subscribe_commit_and_resume_from_the_committed_offset(kafka_broker, unique_name):
    topic, group = unique_name("groups"), unique_name("group")
    first = [f"first-{i}".encode() for i in range(60)]
    make_topic(kafka_broker.bootstrap, topic, 2, first)

    consumer = group_consumer(kafka_broker.bootstrap, group)
    consumer.subscribe([topic])
    assert sorted(consume(consumer, len(first))) == sorted(first)
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
    assert sum(tp.offset for tp in committed) == len(first)
    consumer.close()

    second = [f"second-{i}".encode() for i in range(20)]
    make_topic_more = Producer({"bootstrap.servers": kafka_broker.bootstrap})
    for key in second:
        make_topic_more.produce(topic, key=key, value=b"v")
    assert make_topic_more.flush(30) == 0

    resumed = group_consumer(
        kafka_broker.bootstrap, group, **{"enable.auto.commit": True, "auto.commit.interval.ms": 200}
    )
    resumed.subscribe([topic])
    assert sorted(consume(resumed, len(second))) == sorted(second)  # nothing from before the commit
    assert consume(resumed, 1, timeout_s=1.5) == []
    resumed.close()  # close commits the auto-commit offsets
    check = group_consumer(kafka_broker.bootstrap, group)
    committed = check.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
    check.close()
    assert sum(tp.offset for tp in committed) == len(first) + len(second)


def test_two_members_split_the_partitions_and_take_over_when_one_leaves(kafka_broker, unique_name):
    topic, group = unique_name("rebalance"), unique_name("group")
    keys = [f"k-{i}".encode() for i in range(40)]
    make_topic(kafka_broker.bootstrap, topic, 4, keys)
    a = group_consumer(kafka_broker.bootstrap, group)
    b = group_consumer(kafka_broker.bootstrap, group)
    a.subscribe([topic])
    b.subscribe([topic])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        a.poll(0.2)
        b.poll(0.2)
        if len(a.assignment()) == 2 and len(b.assignment()) == 2:
            break
    assert {tp.partition for tp in a.assignment()} | {tp.partition for tp in b.assignment()} == {0, 1, 2, 3}
    assert not {tp.partition for tp in a.assignment()} & {tp.partition for tp in b.assignment()}
    b.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(a.assignment()) != 4:
        a.poll(0.2)
    assert len(a.assignment()) == 4
    a.close()


def test_kafka_python_group_consumer_commits(kafka_broker, unique_name):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    topic, group = unique_name("kp-group"), unique_name("group")
    keys = [f"k-{i}".encode() for i in range(30)]
    make_topic(kafka_broker.bootstrap, topic, 1, keys)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=kafka_broker.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < len(keys) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            seen.extend(record.key for record in records)
    consumer.commit()
    assert sorted(seen) == sorted(keys)
    assert consumer.committed(KTopicPartition(topic, 0)) == len(keys)
    consumer.close()


def test_a_member_that_stops_heartbeating_is_dropped_after_its_session_timeout(
    kafka_broker, raw_client, unique_name
):
    """A raw-protocol member joins with a 1 s session and goes silent (a crashed consumer)."""
    from kafka.protocol.consumer import (
        JoinGroupRequest,
        JoinGroupResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )

    topic, group = unique_name("expiry"), unique_name("group")
    make_topic(kafka_broker.bootstrap, topic, 2, [b"k"])
    client = raw_client()

    def join_as(member_id: str) -> JoinGroupResponse:
        return client.request(
            JoinGroupRequest(
                group_id=group,
                session_timeout_ms=1000,
                rebalance_timeout_ms=60000,
                member_id=member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
            ),
            JoinGroupResponse,
            5,
        )

    # The group coordinator of a fresh cluster may still be loading (__consumer_offsets is created
    # on first use): NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS are retried, as clients do.
    deadline = time.monotonic() + 30
    join = join_as("")
    while join.error_code in (14, 15, 16) and time.monotonic() < deadline:
        time.sleep(0.2)
        join = join_as("")
    assert join.error_code == 79  # MEMBER_ID_REQUIRED (KIP-394): join again with the id handed out
    join = join_as(join.member_id)
    assert join.error_code == 0 and join.leader == join.member_id
    sync = client.request(
        SyncGroupRequest(
            group_id=group,
            generation_id=join.generation_id,
            member_id=join.member_id,
            group_instance_id=None,
            assignments=[],
        ),
        SyncGroupResponse,
        3,
    )
    assert sync.error_code == 0

    consumer = group_consumer(kafka_broker.bootstrap, group)
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(consumer.assignment()) != 2:
        consumer.poll(0.2)
    assert len(consumer.assignment()) == 2  # the silent member was removed, not waited for (60 s)
    consumer.close()
