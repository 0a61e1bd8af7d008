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
own protocol, pipelined per coordinator (``bench_txn_ops.seed_open_transactions``) and, for
the commit set, over :data:`SEED_LANES` connection pools in parallel (Kafka serves one request
per connection at a time): InitProducerId, AddPartitionsToTxn and one transactional Produce
batch per transaction: the same requests a transactional producer sends, so the coordinators
hold exactly the state a Spark task leaves. Seeding time is reported, and the whole run is
bounded by ``--budget-s`` (checked between steps: a step that would start past it is skipped
and reported as such).

The commit uses ``TransactionAdmin``'s default lanes (connections per coordinator,
``kafka/protocol/lanes.py``), or ``--lanes N``. ``--sweep-lanes 1,2,4,8`` instead commits equal slices
of the seeded set with each lane count in turn (the measurement behind the default; every key
is still counted once at the end), and times DescribeTransactions of the whole set on one
connection pool, then split over the largest lane count (in that order: the second runs on
warmer JVMs).
``--baseline-lanes 1`` seeds as many again and commits them on one lane after the measured
commit: the before/after ratio within one run.

    .venv/bin/python -m benchmarks cluster_txn [--kafka apache3|embedded|both] [--commit-count N]
        [--poke-count N] [--budget-s S] [--lanes N] [--sweep-lanes N,N,...] [--baseline-lanes N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

PARTITIONS = 6
SEED_LANES = 8  # parallel connection pools for seeding the commit set


def _progress(text: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


TARGETS_S = {"commit": 1.0, "poke": 5.0}


def _create_topic(bootstrap: str, topic: str, replication: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": "2"} if replication >= 3 else {}
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, replication, config=config)]).values():
        future.result(timeout=60)


def _seed(config: Any, ids: list[str], topic: str) -> tuple[list[Any], list[Any]]:
    """Prepared transactions (one record each) for ``ids``, seeded over SEED_LANES pools in parallel."""
    import benchmarks.bench_txn_ops as txn_ops
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin

    txn_ops.PARTITIONS = PARTITIONS  # the seed spreads transactions over this many partitions
    seeded = txn_ops.seed_in_parallel(config, ids, topic, with_records=True, pools=SEED_LANES)
    with TransactionAdmin(config) as admin:
        return seeded, txn_ops._committables(admin, seeded, topic)


def _timed_commit(
    config: Any, committables: list[Any], lanes: int | None, max_workers: int | None = None
) -> dict[str, Any]:
    """One ``TransactionAdmin.commit`` on a fresh admin: wall time, requests, lanes, per connection.

    ``max_workers`` None = ``commit()``'s default (what users get)."""
    import benchmarks.bench_txn_ops as txn_ops
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin

    kwargs = {} if lanes is None else {"lanes": lanes}
    with TransactionAdmin(config, **kwargs) as admin:
        before = admin.requests_sent
        started = time.perf_counter()
        outcomes = admin.commit(committables, **({} if max_workers is None else {"max_workers": max_workers}))
        commit_s = time.perf_counter() - started
        requests = txn_ops._diff(admin.requests_sent, before)
        opened = admin.lanes_opened
        coordinators = len(
            {o for o in admin.wire.coordinators(c.transactional_id for c in committables).values()}
        )
        lane_setting = admin.lanes
    committed = sum(o.outcome == "committed" for o in outcomes)
    assert committed == len(committables), f"{committed} of {len(committables)} committed"
    end_txn = requests.get("EndTxn", 0)
    return {
        "transactions": len(committables),
        "wall_s": round(commit_s, 3),
        "per_txn_ms": round(1000 * commit_s / len(committables), 3),
        "requests": requests,
        "requests_total": sum(requests.values()),
        "lanes": lane_setting,
        "lanes_opened": opened,
        "coordinators": coordinators,
        # EndTxn per (lane, coordinator) connection: what Kafka serialises, one at a time
        "end_txn_per_connection": round(end_txn / (opened * coordinators), 1),
    }


def _describe_lanes(config: Any, ids: list[str], lanes: int) -> dict[str, Any]:
    """DescribeTransactions of ``ids`` on one admin vs. split over ``lanes`` admins in parallel."""
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.protocol.lanes import split

    result: dict[str, Any] = {"ids": len(ids)}
    for n in (1, lanes):
        admins = [TransactionAdmin(config) for _ in range(n)]
        try:
            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=n) as pool:
                found = sum(
                    len(d)
                    for d in pool.map(
                        lambda pair: pair[0].describe(pair[1]), zip(admins, split(ids, n), strict=False)
                    )
                )
            result[f"lanes_{n}_s"] = round(time.perf_counter() - started, 3)
            assert found == len(ids)
        finally:
            for admin in admins:
                admin.close()
    return result


def bench_commit(
    bootstrap: str,
    count: int,
    replication: int,
    lanes: int | None = None,
    sweep: tuple[int, ...] = (),
    baseline: int = 0,
) -> dict[str, Any]:
    """Seed ``count`` prepared transactions with one record each, commit them, count every key."""
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from airflow_provider_kafka_eos.kafka.protocol.lanes import split
    from kafka_eos_testing.verify import assert_exactly_once, count_keys

    run_id = uuid.uuid4().hex[:8]
    topic = f"bench-cluster-commit-{run_id}"
    _create_topic(bootstrap, topic, replication)
    config = KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap})
    started = time.perf_counter()
    seeded, committables = _seed(config, [f"bench-{run_id}-c-{i}-1" for i in range(count)], topic)
    seed_s = time.perf_counter() - started
    _progress(f"seeded {count} prepared transactions in {seed_s:.1f} s; committing")
    result: dict[str, Any]
    if sweep:
        result = {"transactions": count, "sweep": {}}
        for n, part in zip(sweep, split(committables, len(sweep)), strict=True):
            result["sweep"][str(n)] = _timed_commit(config, part, n, max_workers=64)
            _progress(f"lanes={n}: {len(part)} committed in {result['sweep'][str(n)]['wall_s']} s")
        result["describe"] = _describe_lanes(config, [c.transactional_id for c in committables], max(sweep))
        _progress(f"describe: {result['describe']}")
    else:
        result = _timed_commit(config, committables, lanes)
        _progress(f"committed {count} in {result['wall_s']:.2f} s")
        result.update(target_s=TARGETS_S["commit"], met=result["wall_s"] < TARGETS_S["commit"])
        if baseline:
            # The same commit of another `count` on `baseline` lanes, after the measured one (so
            # on JVMs no colder): the before/after ratio within one run.
            more, again = _seed(config, [f"bench-{run_id}-b-{i}-1" for i in range(count)], topic)
            seeded += more
            result["baseline"] = _timed_commit(config, again, baseline)
            result["speedup_vs_baseline"] = round(result["baseline"]["wall_s"] / result["wall_s"], 2)
            _progress(f"baseline: lanes={baseline}: {count} committed in {result['baseline']['wall_s']} s")
    started = time.perf_counter()
    assert_exactly_once(count_keys(bootstrap, topic, timeout_s=300), [t.encode() for t, *_ in seeded])
    verify_s = time.perf_counter() - started
    result.update(seed_s=round(seed_s, 3), verify_s=round(verify_s, 3), verified_exactly_once=True)
    return result


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
        from kafka_eos_testing.embedded import start_embedded_broker

        return start_embedded_broker({"partitions": PARTITIONS, "log_level": "WARNING"})
    from kafka_eos_testing.apache_kafka import ApacheKafkaCluster

    return ApacheKafkaCluster({"nodes": 3, "log_level": "WARN"})


STEPS = ("commit", "poke")


def run_on(
    kind: str,
    commit_count: int,
    poke_count: int,
    deadline: float,
    steps: tuple[str, ...] = STEPS,
    lanes: int | None = None,
    sweep: tuple[int, ...] = (),
    baseline: int = 0,
) -> dict[str, Any]:
    started = time.perf_counter()
    broker = _start(kind)
    result: dict[str, Any] = {"start_s": round(time.perf_counter() - started, 1)}
    _progress(f"{kind} up in {result['start_s']} s")
    replication = 3 if kind == "apache3" else 1
    try:
        for name, step in (
            (
                "commit",
                lambda: bench_commit(broker.bootstrap, commit_count, replication, lanes, sweep, baseline),
            ),
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
    parser.add_argument(
        "--lanes", type=int, default=None, help="connections per coordinator (default: the admin's)"
    )
    parser.add_argument(
        "--sweep-lanes", default="", help="comma-separated lane counts: commit a slice with each"
    )
    parser.add_argument(
        "--baseline-lanes", type=int, default=0, help="also commit as many on this many lanes (e.g. 1), after"
    )
    args = parser.parse_args(argv)
    sweep = tuple(int(x) for x in args.sweep_lanes.split(",") if x.strip())
    started = time.monotonic()
    deadline = started + args.budget_s
    kinds = ["embedded", "apache3"] if args.kafka == "both" else [args.kafka]
    result: dict[str, Any] = {"budget_s": args.budget_s}
    for kind in kinds:
        steps = tuple(x.strip() for x in args.steps.split(",") if x.strip())
        result[kind] = run_on(
            kind, args.commit_count, args.poke_count, deadline, steps, args.lanes, sweep, args.baseline_lanes
        )
    result["wall_s"] = round(time.monotonic() - started, 1)
    return result
