"""What the write asks of a Spark session, answered for classic Spark and for Spark Connect alike.

A Spark Connect session (Spark 3.5+ clients, the default of Spark 4; Databricks serverless and shared
clusters allow nothing else) has no SparkContext and no RDDs: its DataFrames are plans sent to a
server. The writer therefore never touches ``sparkContext`` or ``df.rdd`` directly; it asks this
module, which uses the DataFrame API on Connect and the SparkContext only where one exists.
"""

from __future__ import annotations

import contextlib
from typing import Any

__all__ = ["conf_values", "is_connect", "partition_count", "set_log_level"]


def is_connect(spark: Any) -> bool:
    """True for a Spark Connect client session (``pyspark.sql.connect``), False for a classic one."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def partition_count(df: Any) -> int:
    """The number of partitions ``df``'s tasks run in.

    Classic: ``df.rdd.getNumPartitions()`` (no job). Connect has no RDD, so the count comes from the
    DataFrame API: the highest ``spark_partition_id()`` of ``df``'s rows, plus one. That runs a job over
    ``df`` (column-pruned: no column is read) and misses trailing empty partitions, which write nothing;
    the writer uses the count only as a hint (POOLING's id table, PROBING's first range), never for
    which id a partition takes, so only callers that need the hint pay for it.
    """
    if not is_connect(df.sparkSession):
        return df.rdd.getNumPartitions()
    from pyspark.sql import functions as F

    row = df.select(F.spark_partition_id().alias("p")).agg(F.max("p").alias("p")).first()
    return 0 if row is None or row["p"] is None else int(row["p"]) + 1


def set_log_level(spark: Any, level: str) -> None:
    """The driver's Spark log level; a Connect client has no driver of its own (the server's log level
    is its operator's), so there is nothing to set."""
    if not is_connect(spark):
        spark.sparkContext.setLogLevel(level)


def conf_values(spark: Any, key: str, default: str) -> list[str]:
    """Every value ``key`` has where this session can read it: the session's conf (on Connect it sees
    the server's Spark conf too) and, classic only, the SparkContext's."""
    values = []
    with contextlib.suppress(Exception):  # some versions raise for core keys unknown to the SQL conf
        values.append(str(spark.conf.get(key, default)))
    if not is_connect(spark):
        with contextlib.suppress(Exception):
            values.append(str(spark.sparkContext.getConf().get(key, default)))
    return values
