"""Scale: the exactly-once job on the two-worker standalone cluster, 16 partitions, 10 million records.

``./run bench spark_scale [--records=N] [--partitions=P] [--kafka=apache|embedded]``

The job is spark-submitted in client mode to a master + 2 workers (1 core, 2 GB each) whose
executors run the provider-less Python environment (``kafka_eos_testing/spark_cluster.py``); Kafka is a
real Apache Kafka 4.4 single node (default) with P partitions. Reported: records/s of the write
(prepare, from the job's own log line) and of prepare + commit, the wall time of the whole
spark-submit (JVM start included), and the executors' peak memory (resident set of each executor
JVM plus its Python workers, sampled every 0.5 s).
"""

from __future__ import annotations

import pathlib
import re
import tempfile
import threading
import time
import uuid
from typing import Any

from benchmarks.options import parse_options

APP = pathlib.Path(__file__).resolve().parent / "spark_scale_app.py"
_PREPARED = re.compile(r"prepared: (\d+) transaction\(s\), (\d+) record\(s\) in ([0-9.]+)s")


OPTION_DEFAULTS: dict[str, Any] = {"records": 10_000_000, "partitions": 16, "kafka": "apache"}


def _rss_kib(pid: int) -> int:
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


class MemorySampler:
    """Peak RSS per executor (its JVM + Python workers) while the job runs."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.peak_kib: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for executor in self.cluster.executor_pids():
                total = sum(_rss_kib(pid) for pid in _descendants(executor))
                self.peak_kib[executor] = max(self.peak_kib.get(executor, 0), total)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def main(argv: list[str]) -> dict[str, Any]:
    from airflow_provider_kafka_eos.kafka.checkpoints.manifest import read_manifest
    from benchmarks.bench_spark_vs_sink import end_offsets, start_kafka
    from kafka_eos_testing.spark import (
        commit_manifest,
        job_arguments,
        reported_manifest_uri,
        spark_submit_job,
    )
    from kafka_eos_testing.spark_cluster import start_cluster

    opts = parse_options(argv, OPTION_DEFAULTS)
    records, partitions = opts["records"], opts["partitions"]
    kafka, bootstrap, kafka_name = start_kafka(opts["kafka"], partitions)
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-spark-scale-"))
    try:
        with start_cluster(
            workers=2, worker_memory="2g", executor_memory="1g", work_dir=work / "cluster"
        ) as cluster:
            prefix = f"scale-{uuid.uuid4().hex[:8]}"
            arguments = job_arguments(
                prefix=prefix,
                topic=prefix,
                checkpoint=1,
                manifest_base=work / "m",
                application=f"{APP}:build_dataframe",
                params={"records": records, "partitions": partitions},
            )
            conf = {**cluster.submit_conf(quick=False), "spark.driver.memory": "1g"}
            start = time.perf_counter()
            with MemorySampler(cluster) as memory:
                result = spark_submit_job(
                    arguments,
                    client_config={"bootstrap.servers": bootstrap},
                    work_dir=work,
                    master=cluster.master_url,
                    conf=conf,
                    timeout_s=1800,
                )
            submit_s = time.perf_counter() - start
            if result.returncode != 0:
                raise RuntimeError(f"the scale job failed ({result.returncode}):\n{result.stdout[-3000:]}")
            manifest = read_manifest(reported_manifest_uri(result.stdout))
            match = _PREPARED.search(result.stdout + result.stderr)
            prepare_s = float(match.group(3)) if match else float("nan")
            commit_start = time.perf_counter()
            commit_manifest({"bootstrap.servers": bootstrap}, manifest)
            commit_s = time.perf_counter() - commit_start
            prepared = sum(c.record_count for c in manifest.committables)
            assert prepared == records, f"prepared {prepared} of {records}"
            offsets = end_offsets(
                bootstrap, prefix
            )  # records + one commit marker per transaction and partition
            seen = committed_keys(bootstrap, prefix, records)
            peaks = sorted(memory.peak_kib.values(), reverse=True)
            return {
                "records": records,
                "spark_partitions": partitions,
                "transactions": len(manifest.committables),
                "cluster": "standalone: 2 workers x 1 core, executors of 1g without the provider",
                "kafka": kafka_name,
                "log_end_offsets": offsets,
                "read_committed": seen,
                "prepare_s": prepare_s,
                "commit_s": round(commit_s, 3),
                "spark_submit_wall_s": round(submit_s, 1),
                "records_per_s_prepare": round(records / prepare_s),
                "records_per_s_prepare_and_commit": round(records / (prepare_s + commit_s)),
                "executor_peak_rss_mib": [round(k / 1024) for k in peaks],
            }
    finally:
        if kafka is not None:
            kafka.stop()


def committed_keys(bootstrap: str, topic: str, records: int, timeout_s: float = 900) -> dict[str, int]:
    """read_committed count of keys 0..records-1 (a bitmap, not a Counter: 10M keys fit in 10 MB)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"scale-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=30)
        parts = [TopicPartition(topic, p, 0) for p in meta.topics[topic].partitions]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=30)[1] for tp in parts}
        consumer.assign(parts)
        seen = bytearray(records)
        total = duplicates = foreign = 0
        done: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(done) < len(parts) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10_000, timeout=1.0):
                if message.error():
                    continue
                total += 1
                key = int(message.key()) if message.key() and message.key().isdigit() else -1
                if 0 <= key < records:
                    duplicates += seen[key]
                    seen[key] = 1
                else:
                    foreign += 1
            for tp in consumer.position(parts):
                if tp.offset >= ends[tp.partition] - 1:
                    done.add(tp.partition)
        return {
            "total": total,
            "distinct": sum(seen),
            "duplicates": duplicates,
            "foreign": foreign,
            "missing": records - sum(seen),
        }
    finally:
        consumer.close()
