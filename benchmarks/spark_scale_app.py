"""The scale benchmark's job: ``records`` keyed rows of 100-byte values in ``partitions`` partitions."""

from __future__ import annotations


def build_dataframe(spark, params):
    return spark.range(int(params["records"]), numPartitions=int(params["partitions"])).selectExpr(
        "cast(id as string) as key", "concat(lpad(cast(id as string), 12, '0'), repeat('x', 88)) as value"
    )
