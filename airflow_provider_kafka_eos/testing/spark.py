"""Spark helpers for tests, benchmarks and the demo of the writer (never used by the data path)."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["commit_manifest", "keyed_frame", "local_spark_session"]


def local_spark_session(master: str = "local[2,3]", app_name: str = "kafka-eos-tests", **conf: str) -> Any:
    """A lean local session (no UI, few shuffle partitions).

    ``local[2,3]`` = 2 cores and up to 3 attempts per task: local mode retries a failed task only
    when the master names a failure count, which the fault-injection tests need.
    Python workers must run this interpreter (the venv's), not the first python3 on PATH.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "1g")
    )
    for key, value in conf.items():
        builder = builder.config(key.replace("__", "."), value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def keyed_frame(spark: Any, tag: str, count: int, partitions: int) -> Any:
    """``count`` rows with keys ``<tag>-<i>`` and small values, in exactly ``partitions`` partitions."""
    return (
        spark.range(count, numPartitions=partitions)
        .selectExpr(f"concat('{tag}-', cast(id as string)) as key", "cast(id * 7 as string) as value")
    )


def commit_manifest(bootstrap_or_config: Any, manifest: Any) -> list[Any]:
    """Commit a manifest's transactions the way the commit task does (without Airflow)."""
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from airflow_provider_kafka_eos.kafka.transactions import TransactionAdmin

    mapping = {"bootstrap.servers": bootstrap_or_config} if isinstance(bootstrap_or_config, str) \
        else bootstrap_or_config
    with TransactionAdmin(KafkaClientConfig.from_mapping(mapping)) as admin:
        return admin.commit(manifest.committables)
