"""One lingering-transaction sensor poke over 10,000 open transactions across 3 prefixes.

Target (embedded broker, this machine): one poke < 3 s. A poke lists the Ongoing transactions
under the prefixes, describes them, reads the PREPARED manifests and classifies every one
(here: 1% commit-pending via a manifest, the rest orphans; a fourth, unwatched prefix adds
foreign noise that must not be listed). Reported:

- ``poke``: ``KafkaLingeringTransactionSensor.poke()`` as a worker runs it, connection lookup
  and a fresh connection pool included (wall time);
- ``scan``: the same work through an admin we hold, so the requests sent can be counted per API;
- ``scan_with_lso_watch``: the same plus an LSO watch of the topic's partitions.

The 10,000 transactions are seeded with the producer's own requests (InitProducerId,
AddPartitionsToTxn, pipelined, over 8 connection pools at once) by ``benchmarks/bench_txn_ops.py``'s
seeding helper: creating them with confluent-kafka producers would take minutes.

    .venv/bin/python -m benchmarks sensor_poke [--count=N] [--bootstrap=HOST:PORT]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid
from typing import Any

PARTITIONS = 8
TARGET_S = 3.0
FOREIGN = 500
SEED_POOLS = 8


def _create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(timeout=30)


def _diff(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {
        k: after.get(k, 0) - before.get(k, 0) for k in sorted(after) if after.get(k, 0) != before.get(k, 0)
    }


def run(bootstrap: str, count: int, *, cleanup: bool = True) -> dict[str, Any]:
    """Seed, poke, scan; ``cleanup=False`` leaves the transactions open (a throwaway cluster)."""
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from airflow_provider_kafka_eos.kafka.operations.scan import ScanSpec, scan
    from airflow_provider_kafka_eos.sensors.lingering import KafkaLingeringTransactionSensor
    from benchmarks.bench_txn_ops import seed_in_parallel
    from kafka_eos_testing.transactions import write_prepared_manifest

    run_id = uuid.uuid4().hex[:8]
    topic = f"bench-poke-{run_id}"
    prefixes = [f"bench-{run_id}-{name}-" for name in ("orders", "payments", "events")]
    ids = [f"{prefixes[i % 3]}{i}-1" for i in range(count)]
    foreign = [f"other-{run_id}-{i}-1" for i in range(FOREIGN)]
    pending = ids[::100]  # 1% of the watched transactions are in a PREPARED manifest
    base_uri = f"file://{tempfile.mkdtemp(prefix='bench-manifests-')}"
    config = KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap})
    os.environ["AIRFLOW_CONN_KAFKA_EOS_BENCH"] = json.dumps(
        {"conn_type": "kafka_eos", "extra": {"bootstrap.servers": bootstrap}}
    )

    _create_topic(bootstrap, topic)
    started = time.perf_counter()
    seed_in_parallel(config, ids + foreign, topic, with_records=False, pools=SEED_POOLS)
    # Each pool seeds its round-robin share in order, so the list's last SEED_POOLS ids are the
    # newest of their pools.
    newest = (ids + foreign)[-SEED_POOLS:]
    with TransactionAdmin(config) as seeder:
        write_prepared_manifest(seeder, base_uri, "bench", topic, pending)
        # min_age below is 1 s: wait (bounded) until the newest transactions are that old
        deadline = time.monotonic() + 30
        while min(d.age_ms() or 0 for d in seeder.describe(newest).values()) < 1000:
            if time.monotonic() > deadline:
                raise RuntimeError("seeded transactions did not age 1 s within 30 s")
            time.sleep(0.05)
    seed_s = time.perf_counter() - started

    spec = ScanSpec(min_age_ms=1000, prefixes=tuple(prefixes), manifest_base_uri=base_uri)
    sensor = KafkaLingeringTransactionSensor(
        task_id="bench",
        kafka_eos_conn_id="kafka_eos_bench",
        prefixes=prefixes,
        min_age=1,
        manifest_base_uri=base_uri,
    )
    started = time.perf_counter()
    poked = sensor.poke({})
    poke_s = time.perf_counter() - started
    counts = poked.xcom_value["counts"]
    assert counts == {
        "orphan": count - len(pending),
        "commit-pending": len(pending),
        "foreign": 0,
        "lso-stall": 0,
    }, counts

    with TransactionAdmin(config) as admin:
        before = admin.requests_sent
        started = time.perf_counter()
        findings = scan(admin, spec)
        scan_s = time.perf_counter() - started
        scan_requests = _diff(admin.requests_sent, before)
        assert len(findings.transactions) == count

        lso_spec = ScanSpec(
            min_age_ms=1000,
            prefixes=tuple(prefixes),
            manifest_base_uri=base_uri,
            lso_partitions=(topic,),
            min_lso_stall_ms=0,
        )
        before = admin.requests_sent
        started = time.perf_counter()
        scan(admin, lso_spec)
        lso_s = time.perf_counter() - started
        lso_requests = _diff(admin.requests_sent, before)

        if cleanup:
            admin.abort(ids + foreign)  # leave the cluster clean when pointed at a shared one

    return {
        "open_transactions": count + FOREIGN,
        "watched": count,
        "prefixes": 3,
        "commit_pending": len(pending),
        "poke": {"wall_s": round(poke_s, 3), "target_s": TARGET_S, "met": poke_s < TARGET_S},
        "scan": {
            "wall_s": round(scan_s, 3),
            "requests": scan_requests,
            "requests_total": sum(scan_requests.values()),
        },
        "scan_with_lso_watch": {
            "wall_s": round(lso_s, 3),
            "partitions": PARTITIONS,
            "requests": lso_requests,
            "requests_total": sum(lso_requests.values()),
        },
        "seed_s": round(seed_s, 3),
    }


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="bench sensor_poke")
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--bootstrap", default=None, help="use this cluster instead of an embedded broker")
    args = parser.parse_args(argv)
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="bench-airflow-"))
    if args.bootstrap:
        return {**run(args.bootstrap, args.count), "broker": args.bootstrap}
    from kafka_eos_testing.embedded import start_embedded_broker

    broker = start_embedded_broker({"partitions": PARTITIONS, "log_level": "WARNING"})
    try:
        result = run(broker.bootstrap, args.count)
    finally:
        broker.stop()
    return {**result, "broker": "embedded (kafka-eos-devbroker subprocess)"}
