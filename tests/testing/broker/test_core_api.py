"""Individual APIs at the wire level: acks=0, Fetch long poll, topic admin, configs, auto-create."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

pytestmark = [pytest.mark.broker, pytest.mark.broker_double]


def record_batch(key: bytes) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 16,
    )
    builder.append(0, timestamp=int(time.time() * 1000), key=key, value=b"v", headers=[])
    return bytes(builder.build())


def produce_request(topic: str, key: bytes, acks: int, partition: int = 0) -> ProduceRequest:
    data = ProduceRequest.TopicProduceData
    return ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            data(
                name=topic,
                partition_data=[data.PartitionProduceData(index=partition, records=record_batch(key))],
            )
        ],
    )


def fetch_request(topic: str, offset: int, max_wait_ms: int, isolation: int = 1) -> FetchRequest:
    fetch_topic = FetchRequest.FetchTopic
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=isolation,
        session_id=0,
        session_epoch=-1,
        topics=[
            fetch_topic(
                topic=topic,
                partitions=[
                    fetch_topic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def auto_create(client, topic: str, timeout_s: float = 30.0) -> None:
    """Metadata with auto-creation until the topic is there.

    Kafka creates an auto-created topic asynchronously (the first answers are
    UNKNOWN_TOPIC_OR_PARTITION or LEADER_NOT_AVAILABLE); the embedded broker creates it at once.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        code = metadata(client, [topic], auto_create=True).topics[0].error_code
        if code == 0:
            return
        assert code in (3, 5), f"auto-creating {topic}: error {code}"
        assert time.monotonic() < deadline, f"{topic} was not auto-created within {timeout_s} s"
        time.sleep(0.1)


def metadata(client, topics: list[str] | None, auto_create: bool = False) -> MetadataResponse:
    request = MetadataRequest(
        topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=auto_create,
    )
    return client.request(request, MetadataResponse, 12)


def test_acks_zero_gets_no_response_but_is_written(raw_client, unique_name):
    client = raw_client()
    topic = unique_name("acks0")
    auto_create(client, topic)
    client.correlation_id += 1
    request = produce_request(topic, b"fire-and-forget", acks=0)
    request.with_header(correlation_id=client.correlation_id, client_id="raw")
    payload = bytes(request.encode(version=9, header=True))
    client.send_bytes(len(payload).to_bytes(4, "big") + payload)
    # the next response on this connection answers the next request: nothing came for acks=0
    response = client.request(fetch_request(topic, 0, max_wait_ms=0), FetchResponse, 12)
    partition = response.responses[0].partitions[0]
    assert partition.high_watermark == 1
    assert partition.records  # the batch written with acks=0


def test_fetch_long_poll_is_woken_by_an_append(raw_client, unique_name):
    client, writer = raw_client(), raw_client()
    topic = unique_name("long-poll")
    auto_create(client, topic)
    result = {}

    def long_poll() -> None:
        started = time.monotonic()
        result["response"] = client.request(fetch_request(topic, 0, max_wait_ms=20_000), FetchResponse, 12)
        result["elapsed"] = time.monotonic() - started

    poller = threading.Thread(target=long_poll)
    poller.start()
    produced = writer.request(produce_request(topic, b"wake-up", acks=1), ProduceResponse, 9)
    assert produced.responses[0].partition_responses[0].error_code == 0
    poller.join(timeout=30)
    assert not poller.is_alive()
    partition = result["response"].responses[0].partitions[0]
    assert partition.error_code == 0 and partition.records
    assert result["elapsed"] < 15  # woken by the append, not by the 20 s max_wait


def test_fetch_out_of_range_and_unknown_partition(raw_client, unique_name):
    client = raw_client()
    topic = unique_name("range")
    auto_create(client, topic)
    response = client.request(fetch_request(topic, 5, max_wait_ms=0), FetchResponse, 12)
    assert response.responses[0].partitions[0].error_code == 1  # OFFSET_OUT_OF_RANGE
    produced = client.request(produce_request(topic, b"k", acks=-1, partition=7), ProduceResponse, 9)
    assert produced.responses[0].partition_responses[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_create_topics_errors_and_metadata(kafka_broker, unique_name, raw_client):
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    name = unique_name("admin")
    admin.create_topics([NewTopic(name, 4, 1)])[name].result(30)
    with pytest.raises(KafkaException, match="already exists"):
        admin.create_topics([NewTopic(name, 4, 1)])[name].result(30)
    with pytest.raises(KafkaException, match=r"(?i)replication"):
        _create(admin, unique_name("rf3"), 1, 3)
    with pytest.raises(KafkaException, match="Topic name is invalid: 'bad name!' contains") as bad:
        _create(admin, "bad name!", 1, 1)
    assert bad.value.args[0].code() == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION (17)
    listed = metadata(raw_client(), [name]).topics[0]
    assert sorted(p.partition_index for p in listed.partitions) == [0, 1, 2, 3]
    assert admin.delete_topics([name])[name].result(30) is None
    assert metadata(raw_client(), [name]).topics[0].error_code == 3  # gone (and no auto-create)


def _create(admin: AdminClient, name: str, partitions: int, replication: int) -> None:
    admin.create_topics([NewTopic(name, partitions, replication)])[name].result(30)


def test_no_auto_create_when_disabled(kafka_broker_factory, raw_client, unique_name):
    broker = kafka_broker_factory(auto_create_topics=False)
    topic = unique_name("nope")
    assert metadata(raw_client(broker.bootstrap), [topic], auto_create=True).topics[0].error_code == 3
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 2000})
    errors = []
    producer.produce(topic, value=b"v", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(10)
    assert errors and errors[0] is not None


def test_describe_configs_reports_the_transaction_settings(kafka_broker_factory):
    broker = kafka_broker_factory(
        transaction_max_timeout_ms=120000, abort_check_interval_ms=250, two_phase_commit=True
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(30)
    values = {name: entry.value for name, entry in configs.items()}
    assert values["transaction.max.timeout.ms"] == "120000"
    assert values["transaction.abort.timed.out.transaction.cleanup.interval.ms"] == "250"
    assert values["transaction.two.phase.commit.enable"] == "true"
    assert values["unstable.api.versions.enable"] == "true"
    assert values["transactional.id.expiration.ms"] == "604800000"
    assert values["num.partitions"] == "1"


def test_admin_clients_describe_cluster_features_groups_and_offsets(kafka_broker, unique_name):
    """What operators' tools ask a cluster, through both admin clients."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from kafka import KafkaAdminClient

    topic, group = unique_name("admin-view"), unique_name("group")
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap})
    producer.produce(topic, key=b"k", value=b"v")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    consumer.close()

    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    assert admin.describe_cluster().result(30).controller.id == 1
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert [(tp.topic, tp.offset) for tp in offsets.topic_partitions] == [(topic, 1)]

    kafka_admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    try:
        cluster = kafka_admin.describe_cluster()
        assert [b["broker_id"] for b in cluster["brokers"]] == [1]
        features = kafka_admin.describe_features()
        assert features["transaction.version"]["finalized"] == (2, 2)
        assert any(g["group_id"] == group for g in kafka_admin.list_groups())
        assert kafka_admin.describe_groups([group])[group]["group_state"] == "Empty"
        committed = kafka_admin.list_group_offsets(group)[group]
        assert [(tp.topic, meta.offset) for tp, meta in committed.items()] == [(topic, 1)]
    finally:
        kafka_admin.close()
