"""Real open transactions on the embedded broker, and the manifests that make them commit-pending.

Shared by the sensor, trigger and abort-operator tests (their fixtures: txn_fixtures.py) and the
example DAGs' tests in tests/system/dags.

Transactions are opened with confluent-kafka transactional producers (init, begin, produce,
flush) and released by dropping the reference: ``close()`` would abort them (confluent-kafka
2.16). Every test uses its own topic and transactional-id prefix (the broker is shared).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from kafka_eos_testing.transactions import (  # noqa: F401  (re-exported for the tests)
    produce_transaction,
    write_prepared_manifest,
)


def produce_in_transaction(
    bootstrap: str,
    transactional_id: str,
    topic: str,
    keys: Sequence[str],
    *,
    commit: bool,
    partition: int = 0,
) -> None:
    """Write ``keys`` in one transaction; commit it, or leave it open (Ongoing) on the coordinator."""
    produce_transaction(
        bootstrap,
        transactional_id,
        topic,
        [key.encode() for key in keys],
        commit=commit,
        partitions=[partition],
        transaction_timeout_ms=600_000,
    )


def wait_until_older_than(
    admin: TransactionAdmin, transactional_id: str, age_ms: int, timeout_s: float = 20
) -> None:
    """Poll (with a deadline) until the coordinator's start time of the transaction is ``age_ms`` old."""
    deadline = time.monotonic() + timeout_s
    while True:
        age = admin.describe([transactional_id])[transactional_id].age_ms()
        if age is not None and age >= age_ms:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{transactional_id} did not reach age {age_ms} ms (at {age} ms)")
        time.sleep(0.05)  # polling interval of a deadline-bounded wait for a clock condition


def states(admin: TransactionAdmin, ids: Sequence[str]) -> dict[str, str]:
    return {tid: str(getattr(d.state, "value", d.state)) for tid, d in admin.describe(ids).items()}


def connect_admin(bootstrap: str) -> TransactionAdmin:
    return TransactionAdmin(KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap}))


def set_kafka_eos_connection(monkeypatch, bootstrap: str, conn_id: str = "kafka_eos_default", **extra) -> str:
    """A ``kafka_eos`` connection the way Airflow reads it from an AIRFLOW_CONN_<ID> JSON variable."""
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}",
        json.dumps({"conn_type": "kafka_eos", "extra": {"bootstrap.servers": bootstrap, **extra}}),
    )
    return conn_id


def first_event(trigger, timeout_s: float = 30):
    """The first event a trigger's ``run()`` yields (a :class:`LingeringTransactionTrigger`'s)."""

    async def run():
        return await asyncio.wait_for(trigger.run().asend(None), timeout_s)

    return asyncio.run(run())
