"""The user application the spark-submit fault tests run: ``build_dataframe(spark, params)``."""

from __future__ import annotations

from kafka_eos_testing.spark import keyed_frame


def build_dataframe(spark, params):
    return keyed_frame(spark, params["tag"], int(params["count"]), int(params["partitions"]))
