"""Bytes on the broker per codec: the Arrow producer vs librdkafka, same records, both exactly once.

``./run bench codecs [--records=200000] [--partitions=4] [--kafka=apache|embedded]``

Goal (issue 27): for each of gzip, snappy, lz4 and zstd (and none), the bytes the default (Arrow)
producer leaves in the log are <= 1.1x what the librdkafka path leaves for the same records.
One local Spark session (``local[2]``) holds a cached DataFrame of compressible records (JSON-like
events whose field names and values repeat, as real event streams do); each (codec, producer) cell
writes it with ``write_exactly_once`` (the connection's ``compression.type``), commits the manifest,
reads every stored record batch back raw (a Fetch: the bytes Kafka keeps while the topic's
``compression.type`` is ``producer``), checks that every batch carries the codec, and counts every key
exactly once with a read_committed consumer. Times are reported too (prepare + commit, one run).
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections import Counter
from typing import Any

from benchmarks.bench_spark_vs_sink import start_kafka
from benchmarks.options import parse_options

OPTION_DEFAULTS: dict[str, Any] = {"records": 200_000, "partitions": 4, "kafka": "apache"}
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PRODUCERS = ("arrow", "librdkafka")
VALUE_SQL = (
    'concat(\'{"user": \', cast(id % 5000 as string), \', "event": "\', '
    "element_at(array('view', 'click', 'add_to_cart', 'purchase', 'search'), cast(id % 5 as int) + 1), "
    '\'", "page": "/catalog/item/\', cast(id % 997 as string), \'", "ts": \', '
    'cast(1764000000000 + id * 7 as string), \', "source": "web"}\') as value'
)


def main(argv: list[str]) -> dict[str, Any]:
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from airflow_provider_kafka_eos.kafka.producers.compression import CODECS as CODEC_TABLE
    from airflow_provider_kafka_eos.spark.writer import write_exactly_once
    from kafka_eos_testing.broker.txn_testkit import create_topic
    from kafka_eos_testing.spark import commit_manifest, local_spark_session
    from kafka_eos_testing.stored_batches import stored_batches
    from kafka_eos_testing.transactions import wait_until_committed
    from kafka_eos_testing.verify import assert_exactly_once, count_keys

    opts = parse_options(argv, OPTION_DEFAULTS)
    records, partitions = opts["records"], opts["partitions"]
    kafka, bootstrap, kafka_name = start_kafka(opts["kafka"], partitions)
    config = {"bootstrap.servers": bootstrap}
    admin_config = KafkaClientConfig.from_mapping(config)
    spark = local_spark_session(master="local[2]", app_name="bench-codecs", spark__driver__memory="2g")
    manifests = tempfile.mkdtemp(prefix="bench-codecs-manifests-")
    cells: dict[str, dict[str, Any]] = {}
    try:
        df = (
            spark.range(records, numPartitions=partitions)
            .selectExpr("concat('user-event-', cast(id as string)) as key", VALUE_SQL)
            .cache()
        )  # fmt: skip
        raw_bytes = df.selectExpr("sum(length(key) + length(value)) as n").collect()[0]["n"]
        keys = [r["key"] for r in df.select("key").collect()]
        run = uuid.uuid4().hex[:8]
        checkpoint = 0
        for codec in CODECS:
            for producer in PRODUCERS:
                checkpoint += 1
                topic, prefix = f"bench-codec-{codec}-{producer}-{run}", f"bench-codec-{run}-{checkpoint}"
                create_topic(bootstrap, topic, partitions=partitions)
                setting = {} if codec == "none" else {"compression.type": codec}
                started = time.perf_counter()
                manifest = write_exactly_once(
                    df, topic=topic, kafka_config={**config, **setting}, transactional_id_prefix=prefix,
                    checkpoint_id=checkpoint, manifest_base_uri=manifests, producer=producer,
                )  # fmt: skip
                outcomes = commit_manifest(config, manifest)
                seconds = time.perf_counter() - started
                assert {o.outcome for o in outcomes} == {"committed"}
                with TransactionAdmin(admin_config) as admin:
                    wait_until_committed(admin, [c.transactional_id for c in manifest.committables])
                    batches = stored_batches(admin, topic, partitions)
                assert sum(b.record_count for b in batches) == records
                want = 0 if codec == "none" else CODEC_TABLE[codec].attribute
                seen = Counter(b.attributes & 0x07 for b in batches)
                if (
                    producer == "arrow"
                ):  # librdkafka sends a batch uncompressed when the codec did not shrink it
                    assert set(seen) == {want}, (codec, producer, seen)
                assert_exactly_once(count_keys(bootstrap, topic, timeout_s=300), keys)
                stored = sum(b.size for b in batches)
                cells[f"{codec}/{producer}"] = {
                    "stored_bytes": stored,
                    "batches": len(batches),
                    "batches_per_codec_attribute": dict(seen),
                    "stored_over_raw": round(stored / raw_bytes, 4),
                    "seconds": round(seconds, 2),
                }
                print(f"  {codec:6} {producer:10} {stored:>11,} B in {len(batches)} batches, {seconds:.1f} s",
                      flush=True)  # fmt: skip
        ratios = {
            codec: round(
                cells[f"{codec}/arrow"]["stored_bytes"] / cells[f"{codec}/librdkafka"]["stored_bytes"], 3
            )
            for codec in CODECS
        }
        return {
            "records": records,
            "raw_bytes": raw_bytes,
            "kafka": kafka_name,
            "spark_partitions": partitions,
            "cells": cells,
            "arrow_over_librdkafka_bytes": ratios,
            "target": "<= 1.1 per codec",
            "met": all(r <= 1.1 for r in ratios.values()),
            "verified_exactly_once": True,
        }
    finally:
        spark.stop()
        if kafka is not None:
            kafka.stop()
