"""Compressed record batches at the broker: stored as sent, and refused when they do not decode.

Kafka decompresses every compressed batch it is sent to validate its records (``LogValidator``)
and refuses one whose payload does not decode under the codec its attributes name, or whose
codec id is unknown; the embedded broker does the same (``kafka_eos_testing/broker/records.py``), so a
producer bug in compression fails on both brokers at produce time instead of at the consumer.
A well-formed compressed batch is stored byte for byte (the topic's compression.type is
``producer``, Kafka's default).
"""

from __future__ import annotations

import struct

import crc32c
import pyarrow as pa
import pytest
from kafka.protocol.producer import ProduceRequest
from kafka.structs import TopicPartition

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.producers.compression import Codec
from airflow_provider_kafka_eos.kafka.producers.record_batch import encode_batch
from kafka_eos_testing.broker.txn_testkit import create_topic
from kafka_eos_testing.stored_batches import stored_batches
from kafka_eos_testing.verify import count_keys

pytestmark = pytest.mark.broker

KEYS = [f"key-{i}".encode() for i in range(200)]


def _batch(codec: Codec) -> bytes:
    return encode_batch(pa.array(KEYS), pa.array([b"payload " * 20] * len(KEYS)), producer_id=-1,
                        producer_epoch=-1, base_sequence=-1, transactional=False, codec=codec).data


def _with_attributes(batch: bytes, attributes: int) -> bytes:
    """The batch with other attributes and a CRC that matches them (so only the codec is wrong)."""
    data = bytearray(batch)
    struct.pack_into(">h", data, 21, attributes)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def _produce(admin: TransactionAdmin, topic: str, records: bytes) -> int:
    topic_data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=10_000,
        topic_data=[topic_data(name=topic, partition_data=[
            topic_data.PartitionProduceData(index=0, records=records)])],
        max_version=9,
    )
    leader = admin.wire.leaders([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
    response = admin.wire.send(request, leader)
    return response.responses[0].partition_responses[0].error_code


@pytest.mark.parametrize("attributes", [1, 2, 3, 4, 7], ids=["gzip", "snappy", "lz4", "zstd", "id-7"])
def test_a_batch_that_does_not_decode_under_its_codec_is_refused(kafka_broker, unique_name, attributes):
    topic = unique_name("badcodec")
    create_topic(kafka_broker.bootstrap, topic)
    config = KafkaClientConfig.from_mapping({"bootstrap.servers": kafka_broker.bootstrap})
    with TransactionAdmin(config) as admin:
        # Kafka 4.4 answers UNKNOWN_SERVER_ERROR (-1) with no message; the embedded broker too
        assert _produce(admin, topic, _with_attributes(_batch(Codec()), attributes)) == -1
        assert _produce(admin, topic, _batch(Codec("zstd"))) == 0  # the partition still takes good ones
        assert [b.attributes & 7 for b in stored_batches(admin, topic, 1)] == [4]
    assert count_keys(kafka_broker.bootstrap, topic, isolation="read_committed") == {k: 1 for k in KEYS}
