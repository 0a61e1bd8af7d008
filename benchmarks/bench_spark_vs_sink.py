"""The exactly-once job vs Spark's own Kafka sink vs one raw librdkafka process: same records, same Kafka.

``./run bench spark_vs_sink [--records=N] [--partitions=P] [--rounds=R] [--kafka=apache|embedded]
[--spark=classic|connect]``

One local Spark session (``local[P]``) holds a cached DataFrame of N records (100-byte values)
in P partitions. Each path writes all of it once to a fresh topic of P partitions, after a
small warm-up write of its own:

* ``sink``: Spark's Kafka sink, ``df.write.format("kafka")`` (at-least-once), from
  ``spark-sql-kafka-0-10`` of the running Spark version, fetched with Maven from
  ``benchmarks/spark_kafka_sink/pom.xml`` into ``~/.cache/kafka-eos/spark-kafka-sink-<version>``
  and passed with ``spark.jars``; its producer settings are the connector's defaults;
* ``eos``: ``write_exactly_once`` (prepare, verify, manifest) and the commit of its manifest;
* ``raw``: one Python process, one confluent-kafka producer (librdkafka defaults) producing the
  same N records from memory (generating them is not timed).

``--spark=connect`` runs the same on Spark Connect (issue 37): a local Spark Connect server
(``local[P]``, the connector on its ``spark.jars``) and a client session in this process; the EOS
path's driver side (restore, the vote, the commit) runs here, its producers on the server.

Ratios (goals: >= 1.5 and >= 1.0): sink time / EOS time, and raw time / EOS time, from the
medians of ``--rounds`` rounds (each path once per round, the order rotating); the EOS topic of
every round is counted exactly once by a read_committed consumer. Kafka is a real
Apache Kafka 4.4 single node from the project's launcher (``--kafka=apache``, the default) or
the embedded broker.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

from benchmarks.options import parse_options

VALUE_BYTES = 100
VALUE_SQL = f"concat(lpad(cast(id as string), 12, '0'), repeat('x', {VALUE_BYTES - 12})) as value"
POM = pathlib.Path(__file__).resolve().parent / "spark_kafka_sink" / "pom.xml"


OPTION_DEFAULTS: dict[str, Any] = {"records": 2_000_000, "partitions": 2, "kafka": "apache", "rounds": 3,
                                   "spark": "classic"}


def sink_jars(spark_version: str, scala_binary: str) -> list[str]:
    """The Kafka connector's jars not already in PySpark's own ``jars/`` (fetched once with Maven).

    Several processes may ask at once (two test runs, or ``KAFKA_EOS_TEST_LANES=2``): the fetch holds a
    file lock, and the jars land in a temporary folder renamed into place when Maven is done, so
    nobody ever sees a half-filled cache.
    """
    import pyspark

    cache = pathlib.Path.home() / ".cache" / "kafka-eos" / f"spark-kafka-sink-{spark_version}"
    if not any(cache.glob("spark-sql-kafka-*.jar")):
        cache.parent.mkdir(parents=True, exist_ok=True)
        with _locked(cache.with_name(f"{cache.name}.lock"), timeout_s=900):
            if not any(cache.glob("spark-sql-kafka-*.jar")):  # not fetched meanwhile by the lock's holder
                _fetch(cache, spark_version, scala_binary)
    bundled = {_artifact(p.name) for p in (pathlib.Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(str(p) for p in cache.glob("*.jar") if _artifact(p.name) not in bundled)


def _fetch(cache: pathlib.Path, spark_version: str, scala_binary: str) -> None:
    partial = pathlib.Path(tempfile.mkdtemp(prefix=f"{cache.name}.partial-", dir=cache.parent))
    try:
        mvn = shutil.which("mvn") or "/usr/bin/mvn"
        subprocess.run(
            [mvn, "-q", "-B", "-f", str(POM), "dependency:copy-dependencies", "-DincludeScope=runtime",
             f"-DoutputDirectory={partial}", f"-Dspark.version={spark_version}",
             f"-Dscala.binary={scala_binary}"],
            check=True, timeout=600,
        )  # fmt: skip
        shutil.rmtree(cache, ignore_errors=True)  # an empty or jar-less leftover of an older layout
        partial.rename(cache)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


@contextlib.contextmanager
def _locked(path: pathlib.Path, timeout_s: float) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``, waited for at most ``timeout_s`` (a fetch's own bound)."""
    deadline = time.monotonic() + timeout_s
    with open(path, "w") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{path}: held by another fetch for over {timeout_s:.0f} s") from None
                time.sleep(0.5)  # polling the lock of another process's Maven fetch, bounded above
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _artifact(jar: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``."""
    parts = jar.removesuffix(".jar").split("-")
    while parts and parts[-1][:1].isdigit():
        parts.pop()
    return "-".join(parts)


def start_kafka(kind: str, partitions: int) -> tuple[Any, str, str]:
    """``(handle, bootstrap, description)``: real Kafka 4.4 (single node) or the embedded broker."""
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if bootstrap:
        return None, bootstrap, f"KAFKA_BOOTSTRAP_SERVERS={bootstrap}"
    if kind == "apache":
        from kafka_eos_testing.apache_kafka import KAFKA_VERSION, ApacheKafkaCluster

        cluster = ApacheKafkaCluster({"partitions": partitions, "heap": "1g", "log_level": "WARN"})
        return cluster, cluster.bootstrap, f"Apache Kafka {KAFKA_VERSION}, single node"
    from kafka_eos_testing.embedded import start_embedded_broker

    broker = start_embedded_broker({"partitions": partitions, "log_level": "WARNING"})
    return broker, broker.bootstrap, "embedded broker"


def end_offsets(bootstrap: str, topic: str) -> int:
    """Sum of the topic's high watermarks (records + transaction markers)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}"})
    try:
        meta = consumer.list_topics(topic, timeout=30)
        total = 0
        for p in meta.topics[topic].partitions:
            total += consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
        return total
    finally:
        consumer.close()


def main(argv: list[str]) -> dict[str, Any]:
    from airflow_provider_kafka_eos.spark.writer import write_exactly_once
    from kafka_eos_testing.spark import commit_manifest
    from kafka_eos_testing.verify import assert_exactly_once, count_keys

    opts = parse_options(argv, OPTION_DEFAULTS)
    records, partitions = opts["records"], opts["partitions"]
    import pyspark

    version = pyspark.__version__
    scala = "2.12" if version.startswith("3.") else "2.13"
    jars = sink_jars(version, scala)
    kafka, bootstrap, kafka_name = start_kafka(opts["kafka"], partitions)
    config = {"bootstrap.servers": bootstrap}
    server, spark = _spark_session(opts["spark"], partitions, jars)
    manifests = tempfile.mkdtemp(prefix="bench-sink-manifests-")
    try:
        df = (
            spark.range(records, numPartitions=partitions)
            .selectExpr("cast(id as string) as key", VALUE_SQL)
            .cache()
        )  # fmt: skip
        df.count()
        run = uuid.uuid4().hex[:8]

        def sink(frame: Any, topic: str) -> float:
            start = time.perf_counter()
            (
                frame.write.format("kafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", topic)
                .save()
            )
            return time.perf_counter() - start

        def eos(frame: Any, prefix: str, checkpoint: int) -> tuple[float, float]:
            start = time.perf_counter()
            manifest = write_exactly_once(
                frame,
                topic=f"{prefix}-out",
                kafka_config=config,
                transactional_id_prefix=prefix,
                checkpoint_id=checkpoint,
                manifest_base_uri=manifests,
            )
            prepared = time.perf_counter() - start
            commit_manifest(config, manifest)
            return prepared, time.perf_counter() - start

        # Warm-up of each path: JVM code, Python workers, connections, topic metadata. Every
        # partition gets warm-up rows: ``df.limit(2000)`` (used before) read partition 0 only, so the
        # measured EOS write started the other partitions' Python workers cold (their imports and
        # first Arrow batches: ~3.8 s of a 5.7 s write at 1M records).
        small = (
            spark.range(2000, numPartitions=partitions)
            .selectExpr("cast(id as string) as key", VALUE_SQL)
        )  # fmt: skip
        sink(small, f"bench-sink-warm-{run}")
        eos(small, f"bench-eos-warm-{run}", 1)

        rows = [
            (str(i).encode(), (str(i).zfill(12) + "x" * (VALUE_BYTES - 12)).encode()) for i in range(records)
        ]
        # Rounds, each path once per round, the order rotating (a path that follows a 1M-record write
        # meets a busier broker and JVM): medians and every round are reported.
        times: dict[str, list[float]] = {"sink": [], "eos": [], "eos_prepare": [], "raw": []}
        paths = ["sink", "eos", "raw"]
        for r in range(opts["rounds"]):
            for path in paths[r % 3 :] + paths[: r % 3]:
                topic = f"bench-{path}-{run}-{r}"
                if path == "sink":
                    times["sink"].append(sink(df, topic))
                    assert end_offsets(bootstrap, topic) >= records
                elif path == "eos":
                    prepared_s, total_s = eos(df, f"bench-eos-{run}-{r}", 2)
                    times["eos_prepare"].append(prepared_s)
                    times["eos"].append(total_s)
                    assert_exactly_once(count_keys(bootstrap, f"bench-eos-{run}-{r}-out", timeout_s=300),
                                        [key for key, _ in rows])  # fmt: skip
                else:
                    times["raw"].append(raw_librdkafka(bootstrap, topic, rows))
                    assert end_offsets(bootstrap, topic) == records
        med = {path: statistics.median(values) for path, values in times.items()}
        return {
            "records": records,
            "value_bytes": VALUE_BYTES,
            "spark": version,
            "spark_master": f"local[{partitions}]",
            "spark_mode": opts["spark"],
            "spark_partitions": partitions,
            "kafka": kafka_name,
            "sink_jars": [pathlib.Path(j).name for j in jars],
            "rounds": opts["rounds"],
            "rounds_s": {path: [round(x, 3) for x in values] for path, values in times.items()},
            "sink_s": round(med["sink"], 3),
            "eos_prepare_s": round(med["eos_prepare"], 3),
            "eos_total_s": round(med["eos"], 3),
            "raw_s": round(med["raw"], 3),
            "sink_records_per_s": round(records / med["sink"]),
            "eos_records_per_s": round(records / med["eos"]),
            "raw_records_per_s": round(records / med["raw"]),
            "ratio_eos_over_sink": round(med["sink"] / med["eos"], 3),
            "ratio_eos_over_raw": round(med["raw"] / med["eos"], 3),
            "eos_verified_exactly_once": True,
            "target_ratio": {"eos_over_raw": 1.0, "eos_over_sink": 1.5},
        }
    finally:
        spark.stop()
        if server is not None:
            server.stop()
        if kafka is not None:
            kafka.stop()


def _spark_session(mode: str, partitions: int, jars: list[str]) -> tuple[Any, Any]:
    """``(server or None, session)``: a local classic session, or a client of a local Spark Connect
    server started for this run; both ``local[partitions]`` with the connector's jars and 2 GiB."""
    if mode == "connect":
        from kafka_eos_testing.spark_connect import SparkConnectServer

        server = SparkConnectServer(master=f"local[{partitions}]",
                                    conf={"spark.jars": ",".join(jars), "spark.driver.memory": "2g"})
        return server, server.session()
    if mode != "classic":
        raise SystemExit(f"--spark={mode}: classic or connect")
    from kafka_eos_testing.spark import local_spark_session

    return None, local_spark_session(master=f"local[{partitions}]", app_name="bench-spark-vs-sink",
                                     spark__jars=",".join(jars), spark__driver__memory="2g")


def raw_librdkafka(bootstrap: str, topic: str, rows: list[tuple[bytes, bytes]]) -> float:
    """One confluent-kafka producer with librdkafka's defaults (idempotent, acks=all) writing ``rows``."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer.produce(f"{topic}-warm", b"warm", b"warm", on_delivery=on_delivery)  # connection + producer id
    producer.flush(60)
    start = time.perf_counter()
    for key, value in rows:
        while True:
            try:
                producer.produce(topic, value, key, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300) or errors:
        raise RuntimeError(f"raw producer failed: {errors[:3]}")
    elapsed = time.perf_counter() - start
    return elapsed
