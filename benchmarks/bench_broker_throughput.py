"""Embedded broker throughput: one confluent-kafka producer, 1 KiB records, with and without transactions.

The transactional run commits every 10,000 records (what a Spark task preparing one
partition does); the plain run uses the same producer settings without a transactional id.
Both write to a fresh single-partition topic on a freshly started ``kafka-eos-devbroker``
(in memory unless ``--data-dir`` is given). The target on the 2-core CI machine is >= 100 MB/s.

Options: ``--records N`` (default 200000), ``--data-dir`` (persist the logs: adds file writes),
``--partitions N`` (default 1), ``--repeat N`` (runs per mode, interleaved; the median is reported:
the CI machine is shared, so single runs vary by 2x).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from kafka_eos_testing.embedded import start_embedded_broker

RECORD_BYTES = 1024
TRANSACTION_RECORDS = 10_000

# What a user tuning for throughput would set: big batches, a little lingering, no compression.
PRODUCER_TUNING = {
    "linger.ms": 20,
    "batch.size": 1_000_000,
    "batch.num.messages": 100_000,
    "queue.buffering.max.kbytes": 65_536,
    "queue.buffering.max.messages": 1_000_000,
    "message.max.bytes": 10_000_000,
    "compression.type": "none",
}


def _run(bootstrap: str, records: int, transactional: bool) -> dict:
    topic = f"bench-{'txn' if transactional else 'plain'}-{uuid.uuid4().hex[:8]}"
    config = {"bootstrap.servers": bootstrap, "enable.idempotence": True, **PRODUCER_TUNING}
    if transactional:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    producer = Producer(config)
    if transactional:
        producer.init_transactions(30)
    value = os.urandom(RECORD_BYTES)
    failures = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            failures.append(err)

    # topic creation and metadata lookups stay outside the timed part
    producer.list_topics(topic, timeout=30)
    started = time.perf_counter()
    sent = 0
    while sent < records:
        if transactional:
            producer.begin_transaction()
        chunk = min(TRANSACTION_RECORDS, records - sent)
        for index in range(chunk):
            while True:
                try:
                    producer.produce(topic, value=value, on_delivery=on_delivery)
                    break
                except BufferError:  # local queue full: let librdkafka deliver some
                    producer.poll(0.01)
            if index % 1000 == 999:  # serve delivery callbacks now and then, as a tuned app would
                producer.poll(0)
        sent += chunk
        if transactional:
            producer.commit_transaction(60)
    remaining = producer.flush(60)
    elapsed = time.perf_counter() - started
    if failures or remaining:
        raise RuntimeError(f"{len(failures)} deliveries failed ({failures[:3]}), {remaining} not delivered")
    # the in-memory broker keeps every record: drop the topic so repeated runs do not pile up
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    megabytes = records * RECORD_BYTES / 1e6
    return {"records": records, "seconds": round(elapsed, 3), "mb_per_s": round(megabytes / elapsed, 1)}


def _median_run(samples: list[dict]) -> dict:
    return sorted(samples, key=lambda r: r["mb_per_s"])[len(samples) // 2]


def main(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="bench broker_throughput")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--data-dir", action="store_true", help="persist logs in a temporary data dir")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5, help="runs per mode, interleaved; medians reported")
    args = parser.parse_args(argv)
    options = {"partitions": args.partitions, "log_level": "WARNING"}
    if args.data_dir:
        options["data_dir"] = tempfile.mkdtemp(prefix="bench-broker-data-")
    broker = start_embedded_broker(options)
    runs: dict[str, list[dict]] = {"non_transactional": [], "transactional": []}
    try:
        for _ in range(args.repeat):  # interleaved, so load from other processes hits both modes alike
            runs["non_transactional"].append(_run(broker.bootstrap, args.records, transactional=False))
            runs["transactional"].append(_run(broker.bootstrap, args.records, transactional=True))
    finally:
        broker.stop()
    plain, transactional = (_median_run(runs[mode]) for mode in ("non_transactional", "transactional"))
    return {
        "record_bytes": RECORD_BYTES,
        "transaction_records": TRANSACTION_RECORDS,
        "persistent": bool(args.data_dir),
        "partitions": args.partitions,
        "cpu_count": os.cpu_count(),
        "non_transactional": plain,
        "transactional": transactional,
        "transactional_to_plain_ratio": round(transactional["mb_per_s"] / plain["mb_per_s"], 3),
        "samples_mb_per_s": {mode: [r["mb_per_s"] for r in samples] for mode, samples in runs.items()},
        "target_mb_per_s": 100,
    }
