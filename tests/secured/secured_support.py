"""Shared steps of the secured-mode tests: real Kafka 4.4 nodes in TLS / mTLS / SCRAM modes.

Each test module starts one node for its mode (module scope) and stops it at the end; the
certificates are made for that run in the node's data dir (never committed).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.producers.librdkafka import PartitionTransaction, TransactionProtocol
from airflow_provider_kafka_eos.testing.verify import assert_exactly_once, count_keys

PREFIX = "secured-"


def acl_entries(principal: str) -> list[dict[str, Any]]:
    """What a pipeline principal needs: its topics, transactional ids and the verify consumer's group."""
    return [
        {
            "principal": principal,
            "resource_type": rtype,
            "pattern_type": "PREFIXED",
            "name": name,
            "operation": "ALL",
        }
        for rtype, name in (("TOPIC", PREFIX), ("TRANSACTIONAL_ID", PREFIX), ("GROUP", "kafka-eos-verify-"))
    ]


def write_acl_file(directory: Path, doc: Mapping[str, Any]) -> str:
    path = directory / "acls.json"
    path.write_text(json.dumps(doc))
    return str(path)


def unique(stem: str) -> str:
    return f"{PREFIX}{stem}-{uuid.uuid4().hex[:8]}"


PRODUCER_PATHS = ("librdkafka", "arrow")


def two_partition_pipeline(
    config: Mapping[str, Any], admin_config: Mapping[str, Any], path: str = "librdkafka"
) -> float:
    """Create a 2-partition topic, write one transaction per partition through one of the
    provider's producer paths (``librdkafka``: confluent-kafka; ``arrow``: RecordBatch v2 over the
    kafka-python wire), commit both through the transaction admin, and count keys as a
    read_committed consumer. Returns the seconds it took."""
    from confluent_kafka.admin import AdminClient, NewTopic

    started = time.monotonic()
    topic = unique("topic")
    admin = AdminClient(dict(admin_config))
    admin.create_topics([NewTopic(topic, 2, 1)], operation_timeout=10)[topic].result(timeout=15)
    client = KafkaClientConfig.from_mapping(dict(config))
    expected: list[bytes] = []
    with TransactionAdmin(client) as txn_admin:
        protocol = TransactionProtocol.from_admin(txn_admin)
        committables = []
        for partition in (0, 1):
            tid = unique(f"p{partition}")
            keys = [f"{tid}/{i}".encode() for i in range(50)]
            expected += keys
            if path == "arrow":
                import pyarrow as pa

                from airflow_provider_kafka_eos.kafka.producers.arrow import ArrowPartitionTransaction

                arrow = ArrowPartitionTransaction(
                    admin=txn_admin,
                    transactional_id=tid,
                    topic=topic,
                    transaction_timeout_ms=60_000,
                    protocol=protocol,
                )
                arrow.begin()
                arrow.write_columns(
                    pa.array(keys, pa.binary()),
                    pa.array([b"v"] * len(keys), pa.binary()),
                    partitions=pa.array([partition] * len(keys), pa.int32()),
                )
                committable = arrow.prepare()
            else:
                txn = PartitionTransaction(
                    confluent_config=client.confluent(),
                    transactional_id=tid,
                    topic=topic,
                    transaction_timeout_ms=60_000,
                    protocol=protocol,
                    describe=txn_admin.describe,
                    init_timeout_s=30,
                )
                txn.begin()
                txn.write_rows(keys, [b"v"] * len(keys), partitions=[partition] * len(keys))
                committable = txn.prepare()
            assert committable is not None
            committables.append(committable)
        assert count_keys(dict(config), topic) == {}  # prepared, not visible to read_committed
        outcomes = txn_admin.commit(committables)
    assert sorted(o.outcome for o in outcomes) == ["committed", "committed"]
    assert_exactly_once(count_keys(dict(config), topic), expected)
    return time.monotonic() - started


LIMIT_S = 1.0


def refusal_on_both_paths(
    config: Mapping[str, Any], error_cls: type[Exception]
) -> list[tuple[str, str, float]]:
    """Connect with ``config`` through the kafka-python wire and the librdkafka producer; each must
    raise ``error_cls`` within :data:`LIMIT_S`. Returns ``(path, message, seconds)`` per path."""
    import pytest

    from airflow_provider_kafka_eos.kafka.protocol.wire import Wire

    client = KafkaClientConfig.from_mapping(dict(config))
    results = []
    started = time.monotonic()
    with pytest.raises(error_cls) as caught:
        Wire(client, connect_timeout_ms=10_000)
    results.append(("kafka-python", str(caught.value), time.monotonic() - started))
    txn = PartitionTransaction(
        confluent_config=client.confluent(),
        transactional_id=unique("refused"),
        topic=unique("refused"),
        transaction_timeout_ms=60_000,
        protocol=TransactionProtocol(transaction_version=2, end_txn_version=5),
        describe=lambda ids: {},
        init_timeout_s=10,
    )
    started = time.monotonic()
    with pytest.raises(error_cls) as caught:
        txn.begin()
    results.append(("librdkafka", str(caught.value), time.monotonic() - started))
    for path, message, took in results:
        print(f"refusal {error_cls.__name__} {path} {took * 1000:.0f} ms: {message.split('. Next step')[0]}")
        assert took < LIMIT_S, (path, took, message)
        assert "password" not in message.lower() or "sasl.password" in message, message
    return results
