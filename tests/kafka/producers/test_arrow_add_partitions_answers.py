"""How the Arrow producer treats AddPartitionsToTxn's per-partition error codes (TV1).

Kafka answers a multi-partition AddPartitionsToTxn with OPERATION_NOT_ATTEMPTED (55) for the
partitions it skipped because another one failed; Java's producer sends those again with the
failed ones. TRANSACTION_COORDINATOR_FENCED (52) belongs to WriteTxnMarkers between brokers and is
never a producer's retry signal. Neither answer can be made on demand by a real broker (55 needs a
partition whose metadata the coordinator lacks while the producer has it), so the first answer is
scripted at the wire boundary, the only mock here; every other request goes to the embedded
broker, and each test ends with a read_committed count.
"""

from __future__ import annotations

from types import SimpleNamespace

import pyarrow as pa
import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import KafkaEosError
from airflow_provider_kafka_eos.kafka.producers.arrow import ArrowPartitionTransaction
from airflow_provider_kafka_eos.kafka.producers.librdkafka import TransactionProtocol
from airflow_provider_kafka_eos.kafka.producers.partitioner import partition_for_key
from airflow_provider_kafka_eos.kafka.protocol.error_codes import (
    OPERATION_NOT_ATTEMPTED,
    TRANSACTION_COORDINATOR_FENCED,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from kafka_eos_testing.broker.txn_testkit import create_topic
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker

PARTITIONS = 3


def _keys_on_every_partition() -> list[bytes]:
    keys, seen = [], set()
    for i in range(10_000):
        key = f"k-{i}".encode()
        keys.append(key)
        seen.add(partition_for_key(key, PARTITIONS))
        if len(keys) >= 30 and len(seen) == PARTITIONS:
            return keys
    raise AssertionError("no key set covering every partition")


def _scripted_first_answer(txn: ArrowPartitionTransaction, codes: list[int]) -> list[list[int]]:
    """Make the first AddPartitionsToTxn answer ``codes`` (one per partition asked, in order);
    returns the partition lists of every AddPartitionsToTxn sent."""
    sent: list[list[int]] = []
    real_send_all = txn.wire.send_all

    def send_all(requests, **kwargs):
        request = requests[0][0]
        if type(request).__name__ != "AddPartitionsToTxnRequest":
            return real_send_all(requests, **kwargs)
        partitions = list(request.v3_and_below_topics[0].partitions)
        sent.append(partitions)
        if len(sent) > 1:
            return real_send_all(requests, **kwargs)
        rows = [SimpleNamespace(partition_index=p, partition_error_code=c)
                for p, c in zip(partitions, codes, strict=False)]
        return [SimpleNamespace(results_by_topic_v3_and_below=[SimpleNamespace(results_by_partition=rows)])]

    txn.wire.send_all = send_all
    return sent


def _transaction(broker, topic: str, tid: str) -> tuple[TransactionAdmin, ArrowPartitionTransaction]:
    admin = TransactionAdmin(KafkaClientConfig.from_mapping({"bootstrap.servers": broker.bootstrap}))
    txn = ArrowPartitionTransaction(admin=admin, transactional_id=tid, topic=topic,
                                    transaction_timeout_ms=60_000,
                                    protocol=TransactionProtocol.from_admin(admin))
    return admin, txn


def test_partitions_not_attempted_are_added_again_with_the_failed_one(kafka_broker_pool, unique_name):
    broker = kafka_broker_pool(transaction_version=1)  # one TV1 broker for the module
    topic, tid = unique_name("not-attempted"), unique_name("not-attempted-tid")
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    admin, txn = _transaction(broker, topic, tid)
    keys = _keys_on_every_partition()
    try:
        txn.begin()
        sent = _scripted_first_answer(
            txn, [UNKNOWN_TOPIC_OR_PARTITION] + [OPERATION_NOT_ATTEMPTED] * (PARTITIONS - 1))
        txn.write_columns(pa.array(keys, pa.binary()), pa.array([b"v"] * len(keys), pa.binary()))
        committable = txn.prepare()
        admin.commit([committable])
    finally:
        admin.close()
    assert len(sent) == 2 and sorted(sent[1]) == sorted(sent[0]) == list(range(PARTITIONS))
    assert_exactly_once(count_keys(broker.bootstrap, topic), keys)


def test_coordinator_fenced_is_not_a_retry_signal(kafka_broker_pool, unique_name):
    broker = kafka_broker_pool(transaction_version=1)
    topic, tid = unique_name("coord-fenced"), unique_name("coord-fenced-tid")
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    admin, txn = _transaction(broker, topic, tid)
    keys = _keys_on_every_partition()
    try:
        txn.begin()
        sent = _scripted_first_answer(txn, [TRANSACTION_COORDINATOR_FENCED] * PARTITIONS)
        with pytest.raises(KafkaEosError, match="TRANSACTION_COORDINATOR_FENCED"):
            txn.write_columns(pa.array(keys, pa.binary()), pa.array([b"v"] * len(keys), pa.binary()))
            txn.prepare()
    finally:
        txn.release()
        admin.close()
    assert len(sent) == 1
    assert not count_keys(broker.bootstrap, topic, isolation="read_uncommitted")
