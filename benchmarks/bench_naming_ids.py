"""How many transactional ids each naming strategy leaves on the coordinator over 100 checkpoints.

``.venv/bin/python -m benchmarks naming_ids [--checkpoints=N] [--partitions=P]``

For each strategy, N checkpoints of a P-partition pipeline are prepared and committed against
the broker the way the writer does it (restore, then ids from ``naming_support.id_factory``
with the ids still in use, one real transaction per partition, commit). Each id stays on the
coordinator for ``transactional.id.expiration.ms`` (7 days by default), so the number of
distinct ids is the broker memory a pipeline costs: INCREMENTING grows with N x P, POOLING
stays at P (more only while a checkpoint's commit is pending).
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

from benchmarks.options import parse_options

OPTION_DEFAULTS: dict[str, Any] = {"checkpoints": 100, "partitions": 4}


def run_strategy(config: dict[str, Any], strategy: str, checkpoints: int, partitions: int) -> dict[str, Any]:
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from airflow_provider_kafka_eos.kafka.producers.librdkafka import (
        PartitionTransaction,
        TransactionProtocol,
    )
    from airflow_provider_kafka_eos.spark import naming_support

    prefix = f"bench-{strategy.lower()}-{uuid.uuid4().hex[:6]}"
    topic = f"{prefix}-out"
    used: set[str] = set()
    start = time.perf_counter()
    with TransactionAdmin(KafkaClientConfig.from_mapping(config)) as admin:
        protocol = TransactionProtocol.from_admin(admin)
        for checkpoint in range(1, checkpoints + 1):
            in_use = naming_support.open_owned_transactions(admin, prefix) if strategy == "POOLING" else set()
            id_for = naming_support.id_factory(
                strategy, prefix, checkpoint, partitions=partitions, in_use=in_use
            )
            committables = []
            for partition in range(partitions):
                txn = PartitionTransaction(
                    confluent_config=config,
                    transactional_id=id_for(partition),
                    topic=topic,
                    transaction_timeout_ms=60_000,
                    protocol=protocol,
                    describe=admin.describe,
                )
                txn.begin()
                txn.write_rows([f"{checkpoint}-{partition}"], [b"x"])
                committables.append(txn.prepare())
                used.add(txn.transactional_id)
            admin.commit(committables)
        on_coordinator = admin.list(prefixes=[prefix])
    return {
        "distinct_transactional_ids": len(used),
        "ids_on_coordinator": len(on_coordinator),
        "seconds": round(time.perf_counter() - start, 2),
    }


def main(argv: list[str]) -> dict[str, Any]:
    opts = parse_options(argv, OPTION_DEFAULTS)
    broker = None
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        from kafka_eos_testing.embedded import start_embedded_broker

        broker = start_embedded_broker({"log_level": "WARNING"})
        bootstrap = broker.bootstrap
    try:
        config = {"bootstrap.servers": bootstrap}
        results = {
            s: run_strategy(config, s, opts["checkpoints"], opts["partitions"])
            for s in ("INCREMENTING", "POOLING")
        }
    finally:
        if broker is not None:
            broker.stop()
    return {"checkpoints": opts["checkpoints"], "partitions": opts["partitions"], "strategies": results}
