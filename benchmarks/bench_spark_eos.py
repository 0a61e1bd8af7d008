"""Exactly-once write vs a plain idempotent producer: the same Spark job, the same data, one run.

``.venv/bin/python -m benchmarks spark_eos [--records=N] [--partitions=P] [--rounds=R]``

A cached DataFrame of N records (200-byte values) in P partitions is written to Kafka twice
per round: by ``write_exactly_once`` (one transactional producer per partition, prepare,
verify, manifest) and then committed, and by a plain idempotent confluent-kafka producer per
partition (``mapInArrow`` + produce + flush, no transactions). The ratio is throughput of the
exactly-once path (prepare + commit) over the plain path; the target is >= 0.9. Runs against
the embedded broker, or the cluster in ``KAFKA_BOOTSTRAP_SERVERS``.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import uuid
from typing import Any

from benchmarks.options import parse_options

VALUE_BYTES = 200


OPTION_DEFAULTS: dict[str, Any] = {"records": 1_000_000, "partitions": 4, "rounds": 4}


def _plain_writer(bootstrap_config: dict[str, Any], topic: str):
    def write_partition(batches):
        import pyarrow as pa
        from confluent_kafka import Producer

        producer = Producer({**bootstrap_config, "enable.idempotence": True, "acks": "all", "linger.ms": 20})
        errors: list[str] = []
        count = 0

        def on_delivery(err, msg):
            if err is not None:
                errors.append(str(err))

        since_poll = 0
        for batch in batches:
            for key, value in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
                while True:
                    try:
                        producer.produce(topic, value, key, on_delivery=on_delivery)
                        break
                    except BufferError:
                        producer.poll(0.05)
                count += 1
                since_poll += 1
                if since_poll >= 5_000:
                    producer.poll(0)
                    since_poll = 0
        if producer.flush(120) or errors:
            raise RuntimeError(f"plain producer failed: {errors[:3]}")
        yield pa.RecordBatch.from_pydict({"n": [count]})

    return write_partition


def main(argv: list[str]) -> dict[str, Any]:
    from kafka_eos_testing.spark import local_spark_session

    opts = parse_options(argv, OPTION_DEFAULTS)
    broker = None
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        from kafka_eos_testing.embedded import start_embedded_broker

        broker = start_embedded_broker({"partitions": opts["partitions"], "log_level": "WARNING"})
        bootstrap = broker.bootstrap
    config = {"bootstrap.servers": bootstrap}
    spark = local_spark_session(
        master=f"local[{min(opts['partitions'], os.cpu_count() or 2)}]", app_name="bench-spark-eos"
    )
    try:
        df = (
            spark.range(opts["records"], numPartitions=opts["partitions"])
            .selectExpr(
                "cast(id as string) as key",
                f"concat(lpad(cast(id as string), 12, '0'), repeat('x', {VALUE_BYTES - 12})) as value",
            )
            .cache()
        )
        df.count()
        # Warm-up: Python workers, Arrow, connections.
        write_once_plain(spark, df.limit(1000), config, f"bench-warm-{uuid.uuid4().hex[:6]}")

        rounds = []
        manifests = tempfile.mkdtemp(prefix="bench-manifests-")
        for i in range(opts["rounds"]):
            run = uuid.uuid4().hex[:8]
            # Alternate which path goes first: the broker's log grows during a round.
            if i % 2:
                eos = _eos_once(df, config, run, i + 1, manifests, opts["records"])
                plain_s = write_once_plain(spark, df, config, f"bench-plain-{run}")
            else:
                plain_s = write_once_plain(spark, df, config, f"bench-plain-{run}")
                eos = _eos_once(df, config, run, i + 1, manifests, opts["records"])
            rounds.append(
                {
                    "plain_s": round(plain_s, 3),
                    **eos,
                    "ratio_eos_over_plain": round(plain_s / eos["eos_total_s"], 3),
                }
            )
        best_plain = min(r["plain_s"] for r in rounds)
        best_eos = min(r["eos_total_s"] for r in rounds)
        median_ratio = statistics.median(r["ratio_eos_over_plain"] for r in rounds)
        return {
            "records": opts["records"],
            "value_bytes": VALUE_BYTES,
            "spark_partitions": opts["partitions"],
            "broker": "embedded" if broker else bootstrap,
            "rounds": rounds,
            "plain_records_per_s": round(opts["records"] / best_plain),
            "eos_records_per_s": round(opts["records"] / best_eos),
            "ratio_best_eos_over_best_plain": round(best_plain / best_eos, 3),
            "ratio_eos_over_plain": round(median_ratio, 3),  # median of the paired rounds
            "target_ratio": 0.9,
            "meets_target": median_ratio >= 0.9,
        }
    finally:
        spark.stop()
        if broker is not None:
            broker.stop()


def _eos_once(
    df: Any, config: dict[str, Any], run: str, checkpoint: int, manifests: str, records: int
) -> dict:
    from airflow_provider_kafka_eos.spark.writer import write_exactly_once
    from kafka_eos_testing.spark import commit_manifest

    start = time.perf_counter()
    manifest = write_exactly_once(
        df,
        topic=f"bench-eos-{run}",
        kafka_config=config,
        transactional_id_prefix=f"bench-{run}",
        checkpoint_id=checkpoint,
        manifest_base_uri=manifests,
    )
    prepare_s = time.perf_counter() - start
    prepared = sum(c.record_count for c in manifest.committables)
    assert prepared == records, f"prepared {prepared} of {records} records"
    commit_start = time.perf_counter()
    commit_manifest(config, manifest)
    commit_s = time.perf_counter() - commit_start
    return {
        "eos_prepare_s": round(prepare_s, 3),
        "eos_commit_s": round(commit_s, 3),
        "eos_total_s": round(prepare_s + commit_s, 3),
        "transactions": len(manifest.committables),
    }


def write_once_plain(spark: Any, df: Any, config: dict[str, Any], topic: str) -> float:
    start = time.perf_counter()
    total = (
        df.select("key", "value")
        .mapInArrow(_plain_writer(config, topic), "n long")
        .groupBy()
        .sum("n")
        .collect()
    )
    elapsed = time.perf_counter() - start
    assert total[0][0] == df.count(), total
    return elapsed
