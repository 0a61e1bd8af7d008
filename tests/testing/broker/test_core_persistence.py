"""With ``data_dir`` a restart (or a crash) keeps every acknowledged record and every open transaction."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.broker, pytest.mark.broker_double]


def produce(bootstrap: str, topic: str, keys: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for key in keys:
        producer.produce(topic, key=key, value=b"v")
    assert producer.flush(30) == 0


def end_offset(bootstrap: str, topic: str, isolation: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "isolation.level": isolation})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


@pytest.mark.parametrize("how", ["restart", "kill"])
def test_records_survive_a_restart_and_a_crash(kafka_broker_factory, tmp_path, unique_name, how):
    broker = kafka_broker_factory(data_dir=str(tmp_path / "data"), partitions=2)
    topic = unique_name("durable")
    before = [f"before-{i}".encode() for i in range(1500)]
    produce(broker.bootstrap, topic, before)
    if how == "kill":
        broker.kill()
        broker.start()
    else:
        broker.restart()
    after = [f"after-{i}".encode() for i in range(100)]
    produce(broker.bootstrap, topic, after)  # offsets continue; a new producer id does not collide
    assert_exactly_once(count_keys(broker.bootstrap, topic), before + after)


def test_open_transaction_survives_a_restart_and_can_still_commit(
    kafka_broker_factory, tmp_path, unique_name, needs_transactions
):
    broker = kafka_broker_factory(data_dir=str(tmp_path / "data"))
    topic = unique_name("durable-txn")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique_name("txn")})
    producer.init_transactions(30)
    committed = [f"c-{i}".encode() for i in range(10)]
    pending = [f"p-{i}".encode() for i in range(10)]
    producer.begin_transaction()
    for key in committed:
        producer.produce(topic, key=key, value=b"v")
    producer.commit_transaction(30)
    producer.begin_transaction()
    for key in pending:
        producer.produce(topic, key=key, value=b"v")
    assert producer.flush(30) == 0

    broker.restart()
    assert end_offset(broker.bootstrap, topic, "read_committed") == 11  # LSO still at the open transaction
    assert end_offset(broker.bootstrap, topic, "read_uncommitted") == 21
    assert_exactly_once(count_keys(broker.bootstrap, topic), committed)

    producer.commit_transaction(30)  # the same producer reconnects and finishes it
    assert_exactly_once(count_keys(broker.bootstrap, topic), committed + pending)


def test_committed_group_offsets_survive_a_restart(kafka_broker_factory, tmp_path, unique_name):
    broker = kafka_broker_factory(data_dir=str(tmp_path / "data"))
    topic, group = unique_name("offsets"), unique_name("group")
    produce(broker.bootstrap, topic, [b"a", b"b", b"c"])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    consumer.close()
    broker.restart()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        assert consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 2
    finally:
        consumer.close()
