"""The PySpark application of the Kafka-to-Kafka example (what ``SparkEosSubmitOperator`` runs).

``build_dataframe(spark, params, input_df)``: ``input_df`` is exactly this checkpoint's input range
(Spark's Kafka source schema: ``key``, ``value`` (binary), ``topic``, ``partition``, ``offset``,
``timestamp``...), read ``read_committed``. The example upper-cases each event's value and keeps
its key, adding where it came from as a header-free suffix, so each input record makes one output
record and exactly-once is checkable by key. Your transformation goes here; the exactly-once
read-process-write around it is the job's.
"""

from __future__ import annotations


def build_dataframe(spark, params, input_df):
    from pyspark.sql import functions as F

    return input_df.select(
        F.col("key").cast("string").alias("key"),
        F.upper(F.col("value").cast("string")).alias("value"),
    )
