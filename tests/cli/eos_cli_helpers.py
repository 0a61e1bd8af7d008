"""Helpers for the ``kafka-eos-txn`` tests: run the installed script, open real transactions."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, TopicPartition
from kafka_eos_testing.transactions import produce_transaction

CLI = str(Path(sys.executable).with_name("kafka-eos-txn"))


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """The console script as an operator runs it (a subprocess, no shared state with the test)."""
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def run_cli_json(*args: str) -> dict[str, Any]:
    result = run_cli(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def open_transaction(
    bootstrap: str, transactional_id: str, topic: str, keys: list[bytes], timeout_ms: int = 120_000
) -> None:
    """Leave a flushed, Ongoing transaction behind, the way a prepared Spark task does.

    The producer is released by dropping the reference (never ``close()``, which aborts in
    confluent-kafka 2.16), so the transaction stays open on the coordinator.
    """
    produce_transaction(bootstrap, transactional_id, topic, keys, transaction_timeout_ms=timeout_ms)


def describe(bootstrap: str, transactional_id: str):
    with TransactionAdmin(KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap})) as admin:
        return admin.describe([transactional_id], missing_ok=True).get(transactional_id)


ABORTED_STATES = ("CompleteAbort", "Empty")  # after a fence the fencer's InitProducerId leaves it Empty


def state_of(desc) -> str:
    return str(getattr(desc.state, "value", desc.state))


def wait_for_state(bootstrap: str, transactional_id: str, *states: str, timeout_s: float = 30):
    """Poll DescribeTransactions until the id is in one of ``states`` (deadline-bounded)."""
    deadline = time.monotonic() + timeout_s
    while True:
        desc = describe(bootstrap, transactional_id)
        if desc is not None and state_of(desc) in states:
            return desc
        if time.monotonic() > deadline:
            raise AssertionError(f"{transactional_id} did not reach {' or '.join(states)} (last: {desc})")
        time.sleep(0.2)  # polling interval of a deadline-bounded wait, not synchronisation by sleep


def committable_of(bootstrap: str, transactional_id: str, record_count: int) -> Committable:
    """What a Spark task would have written to the manifest for this open transaction."""
    with TransactionAdmin(KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap})) as admin:
        d = admin.describe([transactional_id])[transactional_id]
        tv = 2 if admin.transaction_version() >= 2 else 1
        return Committable(
            transactional_id=transactional_id,
            producer_id=d.producer_id,
            producer_epoch=d.producer_epoch,
            partitions=tuple(TopicPartition(p.topic, p.partition) for p in d.partitions),
            record_count=record_count,
            prepared_at_ms=int(time.time() * 1000),
            transaction_start_ms=d.start_time_ms,
            transaction_timeout_ms=d.timeout_ms,
            transaction_version=tv,
            end_txn_version=admin.end_txn_version(),
        )
