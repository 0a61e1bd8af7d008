"""KIP-939 interop with Kafka's Java client 4.4.0 (``interop/java``), on a 2PC-enabled broker.

What the reference client 4.4.0 does on the wire (checked here on the embedded broker and, with
``KAFKA_EOS_TEST_KAFKA=apache``, on Kafka 4.4): InitProducerId v6 is an *unstable* API version
the Java client never sends, so with ``transaction.two.phase.commit.enable=true`` it still sends
v5, without Enable2Pc or KeepPreparedTxn. Hence:

(a) A 2PC transaction prepared by our Arrow producer: the Java client's completion
    (``initTransactions(keepPreparedTxn=true)``) arrives as a plain InitProducerId, which fences
    and *aborts* the prepared transaction; the Java client then finds nothing kept. Our commit is
    the named DataLossError and nothing is visible. So a Java 4.4.0 producer must never initialise
    a transactional id that holds a prepared checkpoint (docs/runbook/two-phase-commit.md).
(b) A transaction prepared by the Java client's ``prepareTransaction`` is an ordinary one (the
    coordinator stores the producer's 60 s timeout, not Int.MaxValue); ``kafka-eos-txn`` commits it
    with the ``producerId:epoch`` state the Java client reports, every key exactly once.
A Java client or broker that starts doing real 2PC fails these assertions on purpose: that is
the signal to complete through ``completeTransaction``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import DataLossError
from airflow_provider_kafka_eos.kafka.producers.arrow import ArrowPartitionTransaction
from airflow_provider_kafka_eos.kafka.producers.librdkafka import TransactionProtocol
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import TxnState
from kafka_eos_testing.broker.txn_testkit import create_topic
from kafka_eos_testing.transactions import wait_until_committed
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.broker, pytest.mark.interop]

INT32_MAX = 2**31 - 1


def _admin(bootstrap: str) -> TransactionAdmin:
    return TransactionAdmin(KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap}))


def _cli_commit(bootstrap: str, tid: str, producer_id: int, epoch: int) -> list[dict]:
    result = subprocess.run(
        [sys.executable, "-m", "airflow_provider_kafka_eos.cli", "commit", "--bootstrap-servers",
         bootstrap, "--transactional-id", tid, "--producer-id", str(producer_id), "--epoch", str(epoch),
         "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["rows"]


def test_java_44_completion_of_our_prepared_transaction_aborts_it(
    kafka_broker_pool, unique_name, java_interop
):
    broker = kafka_broker_pool(two_phase_commit=True)  # one 2PC broker for the module
    topic, tid = unique_name("interop"), unique_name("interop-ours")
    create_topic(broker.bootstrap, topic, partitions=2)
    keys = [f"o-{i}".encode() for i in range(300)]
    with _admin(broker.bootstrap) as admin:
        txn = ArrowPartitionTransaction(admin=admin, transactional_id=tid, topic=topic,
                                        transaction_timeout_ms=60000,
                                        protocol=TransactionProtocol.from_admin(admin), two_phase=True)
        txn.begin()
        txn.write_columns(pa.array(keys), pa.array(keys))
        prepared = txn.prepare()
        assert admin.describe([tid])[tid].timeout_ms == INT32_MAX  # ours is a real 2PC transaction
    state = f"{prepared.producer_id}:{prepared.producer_epoch}"  # Java's PreparedTxnState format

    result = java_interop.run("complete", broker.bootstrap, tid, state)
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout.startswith("REFUSED no prepared transaction was kept"), result.stdout
    with _admin(broker.bootstrap) as admin:
        after = admin.describe([tid])[tid]
        # Fenced (E -> E+1, abort) and bumped again by the retry: a plain InitProducerId's footprint.
        assert (after.state, after.producer_epoch, after.timeout_ms) == (
            TxnState.EMPTY, prepared.producer_epoch + 2, 60000
        )
        with pytest.raises(DataLossError, match=tid):
            admin.commit([prepared])
    assert count_keys(broker.bootstrap, topic) == {}


def test_java_prepared_is_committed_by_kafka_eos_txn(kafka_broker_pool, unique_name, java_interop):
    broker = kafka_broker_pool(two_phase_commit=True)
    topic, tid = unique_name("interop"), unique_name("interop-java")
    create_topic(broker.bootstrap, topic, partitions=3)
    result = java_interop.run("prepare", broker.bootstrap, tid, topic, "500")
    assert result.returncode == 0 and result.stdout.startswith("PREPARED "), result.stdout + result.stderr
    producer_id, epoch = (int(x) for x in result.stdout.split()[1].split(":"))
    with _admin(broker.bootstrap) as admin:
        described = admin.describe([tid])[tid]
    # Open under the reported state; an ordinary transaction (Java's default 60 s timeout): the
    # 4.4.0 client's Enable2Pc never reaches the broker.
    assert (described.state, described.producer_id, described.producer_epoch, described.timeout_ms) == (
        TxnState.ONGOING, producer_id, epoch, 60000
    )
    assert count_keys(broker.bootstrap, topic) == {}

    rows = _cli_commit(broker.bootstrap, tid, producer_id, epoch)
    assert [r["outcome"] for r in rows] == ["committed"]
    with _admin(broker.bootstrap) as admin:
        wait_until_committed(admin, [tid])
    assert_exactly_once(count_keys(broker.bootstrap, topic), [f"j-{i}".encode() for i in range(500)])
