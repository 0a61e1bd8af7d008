"""Where a checkpoint's time goes: every phase of ``write_exactly_once`` and of the commit, timed.

``./run bench fixed_costs [--records=1000000] [--partitions=2] [--rounds=3] [--kafka=apache|embedded]``

Issue 27 asks where the fixed costs of a 1M-record checkpoint are (store, admin connection,
restore, Spark job set-up, verification, manifest write, commit) so that the EOS job is not
slower than one raw librdkafka process because of them. This benchmark wraps each phase's
function (the same functions the job calls; nothing is skipped) with a timer and runs, on a warm
local Spark session (``local[P]``) and a real Kafka 4.4 node, a tiny checkpoint (10 records: all
fixed cost) and a full one (``--records``), ``--rounds`` times each, reporting the median per
phase; the session's first checkpoint (2,000 records, cold Python workers) is reported on its own.
Every checkpoint is committed and counted exactly once by a read_committed consumer.
Memory per task: one more full checkpoint after the timed ones, with the peak RSS of every PySpark
Python worker sampled (``bench_arrow_producer``'s sampler; kept out of the timed rounds, since
sampling every 50 ms costs CPU). Last, on a fresh session: what any PySpark Arrow UDF pays on cold
Python workers (an identity ``mapInArrow``), beside what importing the Arrow producer adds.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from benchmarks.bench_spark_vs_sink import VALUE_SQL, start_kafka
from benchmarks.options import parse_options

OPTION_DEFAULTS: dict[str, Any] = {"records": 1_000_000, "partitions": 2, "rounds": 3, "kafka": "apache"}


@contextlib.contextmanager
def _timers(spent: dict[str, float]) -> Iterator[None]:
    """Wrap each phase's function with a timer adding to ``spent[phase]``."""
    from airflow_provider_kafka_eos.kafka.admin import transactions
    from airflow_provider_kafka_eos.spark import shipping, writer

    targets = [
        (writer, "_open_store", "store: create + list manifests"),
        (writer, "_restore", "restore (earlier checkpoints, lingering ids)"),
        (writer, "_id_factory", "transactional ids"),
        (shipping, "ship_to_executors", "ship the runtime to executors"),
        (writer, "_collect_committables", "Spark job (tasks prepare their transactions)"),
        (writer, "_verify_still_prepared", "verify still prepared"),
        (writer, "_write_vote", "write the manifest (the vote)"),
        (transactions.TransactionAdmin, "__init__", "admin connection (bootstrap)"),
        (transactions.TransactionAdmin, "commit", "commit: describe + verify + EndTxn"),
    ]
    saved = []
    for owner, name, phase in targets:
        original = getattr(owner, name)
        saved.append((owner, name, original))

        def timed(*args: Any, __original: Any = original, __phase: str = phase, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return __original(*args, **kwargs)
            finally:
                spent[__phase] += time.perf_counter() - started

        setattr(owner, name, timed)
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def main(argv: list[str]) -> dict[str, Any]:
    from airflow_provider_kafka_eos.spark.writer import write_exactly_once
    from kafka_eos_testing.broker.txn_testkit import create_topic
    from kafka_eos_testing.spark import commit_manifest, local_spark_session
    from kafka_eos_testing.verify import assert_exactly_once, count_keys

    opts = parse_options(argv, OPTION_DEFAULTS)
    partitions = opts["partitions"]
    kafka, bootstrap, kafka_name = start_kafka(opts["kafka"], partitions)
    config = {"bootstrap.servers": bootstrap}
    spark = local_spark_session(master=f"local[{partitions}]", app_name="bench-fixed-costs",
                                spark__driver__memory="2g")  # fmt: skip
    manifests = tempfile.mkdtemp(prefix="bench-fixed-manifests-")
    result: dict[str, Any] = {"kafka": kafka_name, "spark_master": f"local[{partitions}]"}
    try:
        run = uuid.uuid4().hex[:8]
        checkpoint = 0
        for label, records in (("first (cold)", 2_000), ("tiny", 10), ("full", opts["records"])):
            df = (
                spark.range(records, numPartitions=partitions)
                .selectExpr("cast(id as string) as key", VALUE_SQL)
                .cache()
            )  # fmt: skip
            df.count()
            rounds = 1 if label.startswith("first") else opts["rounds"]
            per_round: list[dict[str, float]] = []
            for _ in range(rounds):
                checkpoint += 1
                topic = f"bench-fixed-{run}-{checkpoint}"
                create_topic(bootstrap, topic, partitions=partitions)
                spent: dict[str, float] = defaultdict(float)
                with _timers(spent):
                    started = time.perf_counter()
                    manifest = write_exactly_once(
                        df, topic=topic, kafka_config=config, transactional_id_prefix=f"bench-fixed-{run}",
                        checkpoint_id=checkpoint, manifest_base_uri=manifests,
                    )  # fmt: skip
                    prepared = time.perf_counter()
                    assert {o.outcome for o in commit_manifest(config, manifest)} == {"committed"}
                    ended = time.perf_counter()
                spent["prepare (write_exactly_once), whole"] = prepared - started
                spent["commit (admin + commit), whole"] = ended - prepared
                spent["checkpoint, whole"] = ended - started
                per_round.append(dict(spent))
                assert_exactly_once(count_keys(bootstrap, topic, timeout_s=300),
                                    [str(i) for i in range(records)])  # fmt: skip
            if label == "full":
                from benchmarks.bench_arrow_producer import _WorkerMemory

                checkpoint += 1
                topic = f"bench-fixed-{run}-{checkpoint}"
                create_topic(bootstrap, topic, partitions=partitions)
                with _WorkerMemory() as memory:
                    manifest = write_exactly_once(
                        df, topic=topic, kafka_config=config, transactional_id_prefix=f"bench-fixed-{run}",
                        checkpoint_id=checkpoint, manifest_base_uri=manifests,
                    )  # fmt: skip
                commit_manifest(config, manifest)
                assert_exactly_once(count_keys(bootstrap, topic, timeout_s=300),
                                    [str(i) for i in range(records)])  # fmt: skip
                result["memory_per_task"] = {**memory.summary(), "tasks": partitions}
            df.unpersist()
            phases = sorted({p for r in per_round for p in r})
            result[label] = {
                "records": records,
                "median_s": {
                    p: round(statistics.median(r.get(p, 0.0) for r in per_round), 3) for p in phases
                },
                # in order: the first full-size round of a session is the slow one (docs/benchmarks.md)
                "rounds_s": [round(r["checkpoint, whole"], 3) for r in per_round],
                "rounds_spark_job_s": [
                    round(r["Spark job (tasks prepare their transactions)"], 3) for r in per_round
                ],
            }
            print(f"== {label} ({records} records)", flush=True)
            for phase, seconds in result[label]["median_s"].items():
                print(f"  {seconds:8.3f} s  {phase}", flush=True)
        spark.stop()
        result["cold_start"] = _cold_start(partitions)
        return result
    finally:
        spark.stop()
        if kafka is not None:
            kafka.stop()


def _identity(batches: Any) -> Any:
    yield from batches


def _with_provider_imports(batches: Any) -> Any:
    import airflow_provider_kafka_eos.kafka.producers.arrow  # noqa: F401 (what a preparing task imports)

    yield from batches


def _cold_start(partitions: int) -> dict[str, float]:
    """What any PySpark Arrow UDF pays on a fresh session, beside what the provider adds: an
    identity ``mapInArrow`` on cold Python workers, the same again warm, then one that imports the
    Arrow producer (warm workers, so the difference is the provider's imports)."""
    from kafka_eos_testing.spark import local_spark_session

    spark = local_spark_session(master=f"local[{partitions}]", app_name="bench-cold-start")
    try:
        df = spark.range(2000, numPartitions=partitions).selectExpr("cast(id as string) as key").cache()
        df.count()
        timed: dict[str, float] = {}
        for label, function in (
            ("identity mapInArrow, cold workers", _identity),
            ("identity mapInArrow, warm workers", _identity),
            ("mapInArrow importing the Arrow producer, warm workers", _with_provider_imports),
        ):
            started = time.perf_counter()
            df.mapInArrow(function, df.schema).collect()
            timed[label] = round(time.perf_counter() - started, 3)
        return timed
    finally:
        spark.stop()
