"""Commit and sensor poke at scale on a real 3-node Kafka 4.4 cluster, beside the embedded broker.

Goals (issue 8), on this 2-core machine:

- ``commit``: ``TransactionAdmin.commit`` of 10,000 prepared transactions (one record each,
  spread over a topic with replication factor 3 and ``min.insync.replicas=2``) < 1 s; every
  key is then counted once by a read_committed consumer;
- ``poke``: one ``KafkaLingeringTransactionSensor.poke()`` over 50,000 open transactions
  (3 watched prefixes, 1% commit-pending through a PREPARED manifest, 500 foreign) < 5 s, its
  XCom bounded (the full findings go to a file beside the manifests).

Seeding: creating 60,000 open transactions with confluent-kafka producers (one producer, one
``init_transactions`` round trip each) would take an hour here. The seed speaks the producer's
own protocol, pipelined per coordinator (``bench_txn_ops.seed_open_transactions``):
InitProducerId, AddPartitionsToTxn and, for the commit set, one transactional Produce batch
per transaction: the same requests a transactional producer sends, so the coordinators hold
exactly the state a Spark task leaves. Seeding time is reported, and the whole run is bounded
by ``--budget-s`` (checked between steps: a step that would start past it is skipped and
reported as such).

    .venv/bin/python -m benchmarks cluster_txn [--kafka apache3|embedded|both] [--commit-count N]
        [--poke-count N] [--budget-s S]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from typing import Any

PARTITIONS = 6


def _progress(text: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)
TARGETS_S = {"commit": 1.0, "poke": 5.0}


def _create_topic(bootstrap: str, topic: str, replication: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": "2"} if replication >= 3 else {}
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, replication, config=config)]).values():
        future.result(timeout=60)


def bench_commit(bootstrap: str, count: int, replication: int) -> dict[str, Any]:
    """Seed ``count`` prepared transactions with one record each, commit them, count every key."""
    import benchmarks.bench_txn_ops as txn_ops
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from airflow_provider_kafka_eos.kafka.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.testing.verify import assert_exactly_once, count_keys

    run_id = uuid.uuid4().hex[:8]
    topic = f"bench-cluster-commit-{run_id}"
    _create_topic(bootstrap, topic, replication)
    config = KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap})
    txn_ops.PARTITIONS = PARTITIONS  # the seed spreads transactions over this many partitions
    with TransactionAdmin(config, request_timeout_ms=60_000) as seeder:
        started = time.perf_counter()
        seeded = txn_ops.seed_open_transactions(
            seeder.wire, [f"bench-{run_id}-c-{i}-1" for i in range(count)], topic, with_records=True
        )
        committables = txn_ops._committables(seeder, seeded, topic)
        seed_s = time.perf_counter() - started
    _progress(f"seeded {count} prepared transactions in {seed_s:.1f} s; committing")
    with TransactionAdmin(config) as admin:
        before = admin.requests_sent
        started = time.perf_counter()
        outcomes = admin.commit(committables)
        commit_s = time.perf_counter() - started
        requests = txn_ops._diff(admin.requests_sent, before)
    assert sum(o.outcome == "committed" for o in outcomes) == count
    _progress(f"committed {count} in {commit_s:.2f} s; counting keys")
    started = time.perf_counter()
    assert_exactly_once(count_keys(bootstrap, topic, timeout_s=300), [t.encode() for t, *_ in seeded])
    verify_s = time.perf_counter() - started
    return {
        "transactions": count,
        "wall_s": round(commit_s, 3),
        "per_txn_ms": round(1000 * commit_s / count, 3),
        "requests": requests,
        "requests_total": sum(requests.values()),
        "target_s": TARGETS_S["commit"],
        "met": commit_s < TARGETS_S["commit"],
        "seed_s": round(seed_s, 3),
        "verify_s": round(verify_s, 3),
        "verified_exactly_once": True,
    }


def bench_poke(bootstrap: str, count: int) -> dict[str, Any]:
    """``bench_sensor_poke.run`` (one poke, then a counted scan) at ``count`` open transactions."""
    import benchmarks.bench_sensor_poke as poke

    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="bench-airflow-"))
    import benchmarks.bench_txn_ops as txn_ops

    poke.PARTITIONS = txn_ops.PARTITIONS = PARTITIONS  # the topic and the seed agree on partitions
    _progress(f"seeding {count} open transactions (+{poke.FOREIGN} foreign) and poking")
    # No cleanup: the cluster is thrown away; fencing 50,000 transactions is not what is measured.
    result = poke.run(bootstrap, count, cleanup=False)
    wall = result["poke"]["wall_s"]
    result["poke"].update(target_s=TARGETS_S["poke"], met=wall < TARGETS_S["poke"])
    return result


def _start(kind: str) -> Any:
    if kind == "embedded":
        from airflow_provider_kafka_eos.testing.embedded import start_embedded_broker

        return start_embedded_broker({"partitions": PARTITIONS, "log_level": "WARNING"})
    from airflow_provider_kafka_eos.testing.apache_kafka import ApacheKafkaCluster

    return ApacheKafkaCluster({"nodes": 3, "log_level": "WARN"})


STEPS = ("commit", "poke")


def run_on(
    kind: str, commit_count: int, poke_count: int, deadline: float, steps: tuple[str, ...] = STEPS
) -> dict[str, Any]:
    started = time.perf_counter()
    broker = _start(kind)
    result: dict[str, Any] = {"start_s": round(time.perf_counter() - started, 1)}
    _progress(f"{kind} up in {result['start_s']} s")
    replication = 3 if kind == "apache3" else 1
    try:
        for name, step in (
            ("commit", lambda: bench_commit(broker.bootstrap, commit_count, replication)),
            ("poke", lambda: bench_poke(broker.bootstrap, poke_count)),
        ):
            if name not in steps:
                continue
            if time.monotonic() > deadline:
                result[name] = {"skipped": "the benchmark's --budget-s was spent before this step"}
                continue
            result[name] = step()
    finally:
        broker.stop()
    result["broker"] = (
        "Apache Kafka 4.4.0, 3 KRaft nodes (broker+controller), loopback"
        if kind == "apache3"
        else "embedded (kafka-eos-devbroker subprocess)"
    )
    result["total_s"] = round(time.perf_counter() - started, 1)
    return result


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="bench cluster_txn")
    parser.add_argument("--kafka", choices=("apache3", "embedded", "both"), default="both")
    parser.add_argument("--commit-count", type=int, default=10_000)
    parser.add_argument("--poke-count", type=int, default=50_000)
    parser.add_argument("--budget-s", type=float, default=1800.0, help="bound on the whole run's wall time")
    parser.add_argument("--steps", default="commit,poke", help="comma-separated: commit, poke")
    args = parser.parse_args(argv)
    started = time.monotonic()
    deadline = started + args.budget_s
    kinds = ["embedded", "apache3"] if args.kafka == "both" else [args.kafka]
    result: dict[str, Any] = {"budget_s": args.budget_s}
    for kind in kinds:
        steps = tuple(x.strip() for x in args.steps.split(",") if x.strip())
        result[kind] = run_on(kind, args.commit_count, args.poke_count, deadline, steps)
    result["wall_s"] = round(time.monotonic() - started, 1)
    return result
