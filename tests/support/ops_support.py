"""Helpers for the transaction-operation tests (no tests here).

Open transactions are made the way the Spark tasks make them: a real confluent-kafka
transactional producer (init_transactions, begin_transaction, produce, flush), released by
dropping the reference (never ``close()``, which aborts in confluent-kafka 2.16). The
committable is read back from the coordinator (DescribeTransactions), as the task does.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence

from confluent_kafka.admin import AdminClient, NewTopic

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import TransactionDescription
from kafka_eos_testing.transactions import produce_transaction


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def client_config(bootstrap: str) -> KafkaClientConfig:
    return KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10).values():
        future.result(timeout=15)
    return topic


def keys_for(transactional_id: str, count: int) -> list[bytes]:
    return [f"{transactional_id}/{i}".encode() for i in range(count)]


def open_transaction(
    bootstrap: str | dict,
    admin: TransactionAdmin,
    transactional_id: str,
    topic: str,
    keys: Sequence[bytes],
    *,
    partitions: Iterable[int] = (0,),
    timeout_ms: int = 60_000,
) -> Committable:
    """Leave an Ongoing transaction holding ``keys`` (spread over ``partitions``); return its committable.

    ``bootstrap`` is a bootstrap string or a librdkafka config (e.g. with SASL settings).
    """
    first_offsets = produce_transaction(
        bootstrap,
        transactional_id,
        topic,
        keys,
        partitions=list(partitions),
        transaction_timeout_ms=timeout_ms,
        **{"linger.ms": 0},
    )
    described = admin.describe([transactional_id])[transactional_id]
    assert described.state == "Ongoing", (
        f"{transactional_id} is {described.state} after the producer was released"
    )
    tv = 2 if admin.transaction_version() >= 2 else 1
    return Committable(
        transactional_id=transactional_id,
        producer_id=described.producer_id,
        producer_epoch=described.producer_epoch,
        partitions=described.partitions,
        record_count=len(keys),
        prepared_at_ms=int(time.time() * 1000),
        transaction_start_ms=described.start_time_ms,
        transaction_timeout_ms=described.timeout_ms,
        transaction_version=tv,
        end_txn_version=admin.end_txn_version(),
        first_offsets=first_offsets,
    )


def wait_for_state(
    admin: TransactionAdmin, transactional_id: str, states: Iterable[str], timeout_s: float = 15.0
) -> TransactionDescription:
    """Poll DescribeTransactions until the id is in one of ``states`` (AssertionError at the deadline)."""
    wanted = set(states)
    deadline = time.monotonic() + timeout_s
    while True:
        described = admin.describe([transactional_id])[transactional_id]
        if described.state in wanted:
            return described
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{transactional_id} stayed {described.state}, expected one of {sorted(wanted)}"
            )
        time.sleep(0.05)  # poll interval of a deadline-bounded wait
