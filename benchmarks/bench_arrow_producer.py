"""Arrow producer vs librdkafka producer inside the same EOS Spark job, vs one raw librdkafka process.

``.venv/bin/python -m benchmarks arrow_producer [--records=N] [--partitions=P] [--rounds=R]``

One run, one broker, the same records (N keys ``str(id)``, 200-byte values) in a cached
DataFrame of P partitions:

- ``arrow``: ``write_exactly_once(producer="arrow")`` + commit (Arrow columns -> record batches);
- ``arrow_2pc``: the same with ``two_phase_commit=True`` (when the broker has 2PC enabled);
- ``librdkafka``: ``write_exactly_once(producer="librdkafka")`` + commit (one produce() per row);
- ``raw``: one Python process (no Spark) with one idempotent confluent-kafka producer writing
  the same N records, the baseline a user would write by hand.

The Spark paths alternate order per round (the broker's log grows during a run); the table
reports the best round of each. Memory: peak RSS of each PySpark Python worker process during a
path's runs (workers are reused across tasks, so this is the per-task-slot footprint), sampled
every 50 ms. Goals (issue 10): arrow >= 0.9 x librdkafka; the EOS Spark job >= 1.0 x raw.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
import uuid
from typing import Any

from benchmarks.options import parse_options

VALUE_BYTES = 200


OPTION_DEFAULTS: dict[str, Any] = {"records": 1_000_000, "partitions": 4, "rounds": 2}


class _WorkerMemory:
    """Peak RSS per PySpark Python worker process while the sampler runs."""

    def __init__(self) -> None:
        self.peaks: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            for proc in psutil.process_iter(["pid", "cmdline"]):
                cmd = " ".join(proc.info.get("cmdline") or [])
                if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
                    try:
                        rss = proc.memory_info().rss
                    except psutil.Error:
                        continue
                    self.peaks[proc.pid] = max(self.peaks.get(proc.pid, 0), rss)
            self._stop.wait(0.05)

    def summary(self) -> dict[str, float]:
        values = sorted(self.peaks.values())
        return {"workers": len(values), "max_worker_rss_mib": round(values[-1] / 2**20, 1) if values else 0.0}


def _eos(df: Any, config: dict[str, Any], producer: str, two_phase: bool, checkpoint: int, manifests: str,
         records: int) -> dict[str, Any]:
    from airflow_provider_kafka_eos.spark.writer import write_exactly_once
    from kafka_eos_testing.spark import commit_manifest

    run = uuid.uuid4().hex[:8]
    with _WorkerMemory() as memory:
        start = time.perf_counter()
        manifest = write_exactly_once(
            df,
            topic=f"bench-{producer}-{run}",
            kafka_config=config,
            transactional_id_prefix=f"bench-{producer}-{run}",
            checkpoint_id=checkpoint,
            manifest_base_uri=manifests,
            producer=producer,
            two_phase_commit=two_phase,
        )
        prepare_s = time.perf_counter() - start
        commit_manifest(config, manifest)
        total_s = time.perf_counter() - start
    prepared = sum(c.record_count for c in manifest.committables)
    assert prepared == records, f"prepared {prepared} of {records} records"
    assert all(c.two_phase is two_phase for c in manifest.committables)
    return {"prepare_s": round(prepare_s, 3), "total_s": round(total_s, 3), **memory.summary()}


def _raw(config: dict[str, Any], records: int) -> dict[str, Any]:
    """One process, one idempotent librdkafka producer, the same records (built before timing)."""
    import resource

    from confluent_kafka import Producer

    keys = [str(i).encode() for i in range(records)]
    values = [(str(i).rjust(12, "0") + "x" * (VALUE_BYTES - 12)).encode() for i in range(records)]
    producer = Producer({**config, "enable.idempotence": True, "acks": "all", "linger.ms": 20})
    topic = f"bench-raw-{uuid.uuid4().hex[:8]}"
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    start = time.perf_counter()
    for n, (key, value) in enumerate(zip(keys, values, strict=True)):
        while True:
            try:
                producer.produce(topic, value, key, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if n % 5000 == 0:
            producer.poll(0)
    if producer.flush(120) or errors:
        raise RuntimeError(f"raw producer failed: {errors[:3]}")
    elapsed = time.perf_counter() - start
    return {"total_s": round(elapsed, 3),
            "process_max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def main(argv: list[str]) -> dict[str, Any]:
    from kafka_eos_testing.spark import local_spark_session

    opts = parse_options(argv, OPTION_DEFAULTS)
    records = opts["records"]
    broker = None
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    two_phase_available = bool(os.environ.get("KAFKA_TWO_PHASE_COMMIT"))
    if not bootstrap:
        from kafka_eos_testing.embedded import start_embedded_broker

        broker = start_embedded_broker(
            {"partitions": opts["partitions"], "log_level": "WARNING", "two_phase_commit": True}
        )
        bootstrap = broker.bootstrap
        two_phase_available = True
    config = {"bootstrap.servers": bootstrap}
    spark = local_spark_session(
        master=f"local[{min(opts['partitions'], os.cpu_count() or 2)}]", app_name="bench-arrow-producer"
    )
    paths = ["arrow", "librdkafka"] + (["arrow_2pc"] if two_phase_available else [])
    try:
        df = (
            spark.range(records, numPartitions=opts["partitions"])
            .selectExpr(
                "cast(id as string) as key",
                f"concat(lpad(cast(id as string), 12, '0'), repeat('x', {VALUE_BYTES - 12})) as value",
            )
            .cache()
        )
        df.count()
        manifests = tempfile.mkdtemp(prefix="bench-manifests-")
        checkpoint = 0
        # Warm-up: Python workers, Arrow, connections, for both producers.
        for producer in ("arrow", "librdkafka"):
            checkpoint += 1
            _eos(df.limit(1000), config, producer, False, checkpoint, manifests, 1000)
        runs: dict[str, list[dict[str, Any]]] = {p: [] for p in paths}
        for i in range(opts["rounds"]):
            order = paths if i % 2 == 0 else list(reversed(paths))
            for path in order:
                checkpoint += 1
                producer = "arrow" if path.startswith("arrow") else "librdkafka"
                two_phase = path == "arrow_2pc"
                runs[path].append(_eos(df, config, producer, two_phase, checkpoint, manifests, records))
        raw = _raw(config, records)
        best = {p: min(r["total_s"] for r in rs) for p, rs in runs.items()}
        rate = {p: round(records / s) for p, s in best.items()}
        raw_rate = round(records / raw["total_s"])
        return {
            "records": records,
            "value_bytes": VALUE_BYTES,
            "spark_partitions": opts["partitions"],
            "broker": "embedded" if broker else bootstrap,
            "runs": runs,
            "raw_process": raw,
            "records_per_s": {**rate, "raw": raw_rate},
            "ratio_arrow_over_librdkafka": round(best["librdkafka"] / best["arrow"], 3),
            "ratio_arrow_job_over_raw": round(rate["arrow"] / raw_rate, 3),
            "ratio_librdkafka_job_over_raw": round(rate["librdkafka"] / raw_rate, 3),
            "max_worker_rss_mib": {p: max(r["max_worker_rss_mib"] for r in rs) for p, rs in runs.items()},
            "targets": {"arrow_over_librdkafka": 0.9, "eos_job_over_raw": 1.0},
        }
    finally:
        spark.stop()
        if broker is not None:
            broker.stop()
