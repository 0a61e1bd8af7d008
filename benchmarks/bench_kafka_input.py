"""A Kafka-input checkpoint vs the file-input job: the same records, the same exactly-once write, one run.

``./run bench kafka_input [--records=N] [--partitions=P] [--kafka=apache|embedded]``

One local Spark session (``local[P]``, Spark's Kafka connector on ``spark.jars``: the jars of
``spark-sql-kafka-0-10`` of the running Spark version, fetched with Maven into a cache as
``bench_spark_vs_sink`` does). The same N records (string keys, 100-byte values) are laid out
twice before anything is timed: as P JSON-lines files, and in an input topic of P partitions
(written with Spark's Kafka sink). Each path then runs one checkpoint of its own pipeline, after a
warm-up checkpoint of 2,000 records:

* ``file``: ``spark.read.json`` of the files (explicit schema) -> ``write_exactly_once`` -> commit;
  the example pipeline's shape (``dags/eos_pipeline.py`` reads JSON batches);
* ``kafka``: plan the range (the input's last stable offsets, the plan and claim stored) ->
  Spark's Kafka source reads exactly that range ``read_committed`` -> ``write_exactly_once`` (which
  also prepares the group's offsets transaction) -> commit of output and offsets together.

Ratio (goal >= 0.8): file time / Kafka time, each from the start of the checkpoint to the end of
its commit. Both checkpoints must prepare exactly N records. Kafka is a real Apache Kafka 4.4
single node from the project's launcher (``--kafka=apache``, the default) or the embedded broker.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from typing import Any

from benchmarks.bench_spark_vs_sink import VALUE_BYTES, VALUE_SQL, sink_jars, start_kafka
from benchmarks.options import parse_options

OPTION_DEFAULTS: dict[str, Any] = {"records": 2_000_000, "partitions": 2, "kafka": "apache"}
WARM_UP_RECORDS = 2_000
TARGET_RATIO = 0.8


def main(argv: list[str]) -> dict[str, Any]:
    import pyspark

    from kafka_eos_testing.spark import local_spark_session

    opts = parse_options(argv, OPTION_DEFAULTS)
    records, partitions = opts["records"], opts["partitions"]
    version = pyspark.__version__
    jars = sink_jars(version, "2.12" if version.startswith("3.") else "2.13")
    kafka, bootstrap, kafka_name = start_kafka(opts["kafka"], partitions)
    config = {"bootstrap.servers": bootstrap}
    spark = local_spark_session(master=f"local[{partitions}]", app_name="bench-kafka-input",
                                spark__jars=",".join(jars), spark__driver__memory="2g")
    work = tempfile.mkdtemp(prefix="bench-kafka-input-")
    run = uuid.uuid4().hex[:8]
    try:
        layout = Layout(spark, bootstrap, work, partitions)
        warm_files, warm_topic = layout.write(f"warm-{run}", WARM_UP_RECORDS)
        files, topic = layout.write(run, records)
        bench = Checkpoints(spark, config, f"{work}/manifests")
        bench.file_input(warm_files, f"bench-kin-file-warm-{run}", WARM_UP_RECORDS)
        bench.kafka_input(warm_topic, f"bench-kin-kafka-warm-{run}", WARM_UP_RECORDS)
        file_s = bench.file_input(files, f"bench-kin-file-{run}", records)
        kafka_s, stages = bench.kafka_input(topic, f"bench-kin-kafka-{run}", records)
        ratio = file_s / kafka_s
        return {
            "records": records,
            "value_bytes": VALUE_BYTES,
            "spark": version,
            "spark_master": f"local[{partitions}]",
            "spark_partitions": partitions,
            "kafka": kafka_name,
            "file_s": round(file_s, 3),
            "kafka_input_s": round(kafka_s, 3),
            "kafka_input_stages_s": {k: round(v, 3) for k, v in stages.items()},
            "file_records_per_s": round(records / file_s),
            "kafka_input_records_per_s": round(records / kafka_s),
            "ratio_kafka_input_over_file": round(ratio, 3),
            "target_ratio": TARGET_RATIO,
            "meets_target": ratio >= TARGET_RATIO,
        }
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
        if kafka is not None:
            kafka.stop()


class Layout:
    """The same records as JSON-lines files and as an input topic (not timed)."""

    def __init__(self, spark: Any, bootstrap: str, work: str, partitions: int) -> None:
        self.spark, self.bootstrap, self.work, self.partitions = spark, bootstrap, work, partitions

    def write(self, name: str, records: int) -> tuple[str, str]:
        from confluent_kafka.admin import AdminClient, NewTopic

        df = (self.spark.range(records, numPartitions=self.partitions)
              .selectExpr("cast(id as string) as key", VALUE_SQL))
        files = f"{self.work}/input-{name}"
        df.write.json(files)
        topic = f"bench-kin-input-{name}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        created = admin.create_topics([NewTopic(topic, self.partitions, 1)], operation_timeout=30)
        for future in created.values():
            future.result(timeout=60)
        sink = df.write.format("kafka").option("kafka.bootstrap.servers", self.bootstrap)
        sink.option("topic", topic).save()
        return files, topic


class Checkpoints:
    """One checkpoint of each kind, prepared and committed; seconds from its start to its commit."""

    def __init__(self, spark: Any, config: dict[str, Any], manifests: str) -> None:
        self.spark, self.config, self.manifests = spark, config, manifests

    def file_input(self, files: str, pipeline: str, records: int) -> float:
        start = time.perf_counter()
        df = self.spark.read.schema("key string, value string").json(files)
        self._write_and_commit(df, pipeline, records, None)
        return time.perf_counter() - start

    def kafka_input(self, topic: str, pipeline: str, records: int) -> tuple[float, dict[str, float]]:
        from airflow_provider_kafka_eos.kafka.admin.input_offsets import read_input_offsets
        from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
        from airflow_provider_kafka_eos.kafka.checkpoints.identity import InputRecord
        from airflow_provider_kafka_eos.kafka.checkpoints.input_ranges import (
            offsets_transactional_id,
            plan_checkpoint_input,
        )
        from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
        from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
        from airflow_provider_kafka_eos.spark.kafka_source import read_input_range

        config = KafkaClientConfig.from_mapping(self.config)
        start = time.perf_counter()
        store = ManifestStore(self.manifests)
        store.create()
        with TransactionAdmin(config) as admin:
            plan = plan_checkpoint_input(
                store, pipeline_id=pipeline, checkpoint_id=1,
                facts_for=lambda s: read_input_offsets(admin, [topic], start=s, group=f"{pipeline}-group"),
                topics=[topic], group=f"{pipeline}-group", start="earliest",
                offsets_transactional_id=offsets_transactional_id(pipeline))
        planned = time.perf_counter()
        if plan.records_upper_bound != records:
            raise RuntimeError(f"planned {plan.records_upper_bound} offsets of {records} records")
        df = read_input_range(self.spark, plan, config).selectExpr("CAST(key AS STRING) AS key",
                                                                     "CAST(value AS STRING) AS value")
        self._write_and_commit(df, pipeline, records, InputRecord(f"kafka:{pipeline}", None, plan))
        end = time.perf_counter()
        return end - start, {"plan_s": planned - start, "read_prepare_commit_s": end - planned}

    def _write_and_commit(self, df: Any, pipeline: str, records: int, record: Any) -> None:
        from airflow_provider_kafka_eos.spark.writer import write_exactly_once
        from kafka_eos_testing.spark import commit_manifest

        manifest = write_exactly_once(df, topic=f"{pipeline}-out", kafka_config=self.config,
                                      transactional_id_prefix=pipeline, pipeline_id=pipeline, checkpoint_id=1,
                                      manifest_base_uri=self.manifests, input_record=record)
        prepared = sum(c.record_count for c in manifest.output_committables)
        if prepared != records:
            raise RuntimeError(f"{pipeline}: prepared {prepared} of {records} records")
        commit_manifest(self.config, manifest)
