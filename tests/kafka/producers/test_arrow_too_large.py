"""A record batch the broker refuses as too large: the Arrow producer splits it and sends the parts.

The producer cuts its batches to the topic's ``max.message.bytes`` when DescribeConfigs may read
it. A principal without DESCRIBE_CONFIGS on the topic cannot, and then the broker answers a batch
above the limit with MESSAGE_TOO_LARGE: the producer splits it (the parts keep its sequence
numbers, in order), lowers its batch size for what follows, and names a record too large alone
by its key. Every test ends with a read_committed consumer counting each key.
"""

from __future__ import annotations

import logging
import math
import struct
from types import SimpleNamespace

import pyarrow as pa
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import BrokerUnreachableError, UsageError
from airflow_provider_kafka_eos.kafka.producers.arrow import ArrowPartitionTransaction
from airflow_provider_kafka_eos.kafka.producers.arrow_encode import split_runs
from airflow_provider_kafka_eos.kafka.producers.librdkafka import TransactionProtocol
from airflow_provider_kafka_eos.kafka.producers.producer_config import arrow_producer_settings
from airflow_provider_kafka_eos.kafka.protocol.error_codes import TOPIC_AUTHORIZATION_FAILED
from kafka_eos_testing.broker.txn_testkit import create_topic
from kafka_eos_testing.stored_batches import stored_batches
from kafka_eos_testing.transactions import wait_until_committed
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker

LIMIT = 20_000  # the topic's max.message.bytes
BATCH_SIZE = 200_000
MESSAGE_TOO_LARGE = 10
_SEQUENCE = struct.Struct(">ii")  # baseSequence, recordCount: bytes 53..61 of a RecordBatch v2


def _needs_enforcing_broker(kafka_broker) -> None:
    if kafka_broker.embedded:
        pytest.skip("needs a broker that enforces a topic's max.message.bytes; the embedded broker does not "
                    "(docs/embedded-broker-fidelity.md row 15)")


def _small_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, partitions, 1, config={"max.message.bytes": str(LIMIT)})
    admin.create_topics([new])[topic].result(30)


class _WithoutDescribeConfigs:
    """The producer's wire, answering its DescribeConfigs as Kafka answers a principal without
    DESCRIBE_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED for the resource). The only mock, at
    the wire boundary: an ACL-enabled Kafka with a second principal would cost a broker start."""

    def __init__(self, wire) -> None:
        self._wire = wire

    def send(self, request, *args, **kwargs):
        if type(request).__name__ == "DescribeConfigsRequest":
            denied = SimpleNamespace(error_code=TOPIC_AUTHORIZATION_FAILED, configs=[])
            return SimpleNamespace(results=[denied])
        return self._wire.send(request, *args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._wire, name)


def _transaction(
    admin: TransactionAdmin, tid: str, topic: str, keys: dict | None = None
) -> ArrowPartitionTransaction:
    """A transaction whose DescribeConfigs is denied, opened with the connection keys ``keys``."""
    txn = ArrowPartitionTransaction(
        admin=admin, transactional_id=tid, topic=topic, transaction_timeout_ms=60_000,
        protocol=TransactionProtocol.from_admin(admin), settings=arrow_producer_settings(keys or {}),
    )
    txn.wire = _WithoutDescribeConfigs(txn.wire)
    txn.begin()
    return txn


def _admin(bootstrap: str) -> TransactionAdmin:
    return TransactionAdmin(KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap}))


def test_batches_refused_as_too_large_are_split_and_later_ones_fit(kafka_broker, unique_name, caplog):
    """2,000 records of ~1 kB in 200 kB batches (batch.size) to a 20 kB topic whose limit the
    producer cannot read: the broker refuses the first batches, the producer halves them until they
    fit and cuts every later batch to what it learned (four batches per partition: the second wave
    was encoded before the first was refused); every key committed exactly once."""
    _needs_enforcing_broker(kafka_broker)
    topic, partitions = unique_name("arrow-split"), 3
    _small_topic(kafka_broker.bootstrap, topic, partitions)
    keys = [f"key-{i:05d}" for i in range(2000)]
    values = pa.array([(f"{i:05d}" * 200).encode() for i in range(len(keys))])  # 1,000 bytes each
    caplog.set_level(logging.INFO, logger="airflow_provider_kafka_eos.kafka.producers.arrow")
    with _admin(kafka_broker.bootstrap) as admin:
        txn = _transaction(admin, unique_name("tid"), topic, {"batch.size": BATCH_SIZE})
        assert txn.batch_bytes == BATCH_SIZE  # the limit was not read: batch.size stands
        txn.write_columns(pa.array(keys), values)
        committable = txn.prepare()
        assert committable is not None
        assert [o.outcome for o in admin.commit([committable])] == ["committed"]
        wait_until_committed(admin, [txn.transactional_id])
        batches = stored_batches(admin, topic, partitions)
    stats = txn.stats
    assert stats.refused_too_large >= 1
    # Later batches fit from the start: only the first wave's batch of each partition was refused,
    # once per halving from batch.size down to the limit (without the lowered batch size every part
    # above the limit of every batch would be refused on its own: 15 per batch, 180 in all).
    assert stats.refused_too_large <= partitions * math.ceil(math.log2(BATCH_SIZE / LIMIT))
    assert txn.batch_bytes < LIMIT
    assert (stats.records, stats.batches) == (len(keys), len(batches))
    assert stats.bytes == sum(b.size for b in batches) and max(b.size for b in batches) <= LIMIT
    assert stats.batches >= len(keys) * 1000 // LIMIT
    learned = [r for r in caplog.records if "refused a record batch" in r.getMessage()]
    assert [r.levelno for r in learned] == [logging.INFO]  # what was learned, said once
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), keys)


def test_one_record_larger_than_the_broker_accepts_is_named_by_its_key(kafka_broker, unique_name):
    """Split down to the record alone, the broker still refuses it: a UsageError naming its key,
    the topic-partition and the limit; nothing of the transaction is committed."""
    _needs_enforcing_broker(kafka_broker)
    topic = unique_name("arrow-huge")
    _small_topic(kafka_broker.bootstrap, topic, 1)
    keys = [f"k{i}" for i in range(200)] + ["the-huge-one"]
    values = pa.array([b"v" * 500] * 200 + [b"h" * (LIMIT + 1000)])
    with _admin(kafka_broker.bootstrap) as admin:
        txn = _transaction(admin, unique_name("tid"), topic)
        txn.write_columns(pa.array(keys), values)  # the limit is unknown here: buffered
        named = (rf"key 'the-huge-one' was refused by {topic}-0 with MESSAGE_SIZE_TOO_LARGE \(10\).*"
                 r"max\.message\.bytes, which this producer could not read")
        with pytest.raises(UsageError, match=named):
            txn.prepare()
        # the records before it were written (parts of the refused batches), the record itself never
        assert txn.stats.records == 200 and txn.stats.refused_too_large >= 2
        admin.fence(txn.transactional_id, 60_000)  # aborts what the failed task left open
    assert count_keys(kafka_broker.bootstrap, topic) == {}  # read_committed: nothing of it


def test_split_parts_keep_the_refused_batchs_sequences(kafka_broker, unique_name):
    """On either broker: a Produce whose batch is above LIMIT is answered MESSAGE_TOO_LARGE at the
    wire boundary (the only mock: what Kafka answers for a topic's limit, scripted because the
    embedded broker enforces none), and the first part sent after a split has its answer lost, so
    it is re-sent unchanged. The broker checks every sequence; the parts go in order, contiguous."""
    topic = unique_name("arrow-seq")
    create_topic(kafka_broker.bootstrap, topic, partitions=1)
    keys = [f"s{i:04d}" for i in range(1200)]
    values = pa.array([b"x" * 90] * len(keys))  # ~100 bytes a record: 1200 records ~ 6 limits
    sent: list[tuple[int, int, int]] = []  # base sequence, record count, error code scripted (or 0)
    with _admin(kafka_broker.bootstrap) as admin:
        txn = ArrowPartitionTransaction(admin=admin, transactional_id=unique_name("tid"), topic=topic,
                                        transaction_timeout_ms=60_000,
                                        protocol=TransactionProtocol.from_admin(admin))
        txn.begin()
        real_send_all = txn.wire.send_all
        lost = []

        def send_all(requests, **kwargs):
            request = requests[0][0]
            if type(request).__name__ != "ProduceRequest":
                return real_send_all(requests, **kwargs)
            (data,) = request.topic_data[0].partition_data
            sequence, count = _SEQUENCE.unpack_from(data.records, 53)
            if len(data.records) > LIMIT:
                sent.append((sequence, count, MESSAGE_TOO_LARGE))
                row = SimpleNamespace(index=0, error_code=MESSAGE_TOO_LARGE, error_message=None)
                return [SimpleNamespace(responses=[SimpleNamespace(partition_responses=[row])])]
            sent.append((sequence, count, 0))
            answers = real_send_all(requests, **kwargs)
            if not lost and any(code for _, _, code in sent):  # the first part after a split
                lost.append(sequence)
                return [BrokerUnreachableError("answer lost (scripted)")]
            return answers

        txn.wire.send_all = send_all
        txn.write_columns(pa.array(keys), values)
        committable = txn.prepare()
        assert [o.outcome for o in admin.commit([committable])] == ["committed"]
        wait_until_committed(admin, [txn.transactional_id])
    refused = [(s, c) for s, c, code in sent if code]
    assert refused[0] == (0, len(keys)) and txn.stats.refused_too_large == len(refused)
    assert lost and [s for s, _, code in sent if not code].count(lost[0]) == 2  # re-sent as it was
    accepted = []
    for sequence, count, code in sent:
        if not code and (sequence, count) not in accepted:
            accepted.append((sequence, count))
    assert [s for s, _ in accepted] == [sum(c for _, c in accepted[:i]) for i in range(len(accepted))]
    assert sum(c for _, c in accepted) == len(keys) == txn.stats.records
    assert txn.stats.batches == len(accepted) and txn.stats.retries == 1
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), keys)


def test_split_runs_keep_sequences_in_order():
    """The parts of a refused batch: rows 100..110 of a buffer with base sequence 40 cut at 250
    bytes (100 a row): contiguous runs, the first keeping sequence 40; a heavy row stands alone."""
    sizes = pa.array([100] * 10).to_numpy()
    assert split_runs(sizes, 100, 40, 250) == [(100, 102, 40), (102, 104, 42), (104, 106, 44),
                                               (106, 108, 46), (108, 110, 48)]
    heavy = pa.array([10, 900, 10, 10]).to_numpy()
    assert split_runs(heavy, 0, 7, 450) == [(0, 1, 7), (1, 2, 8), (2, 4, 9)]
