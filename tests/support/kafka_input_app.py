"""The user application of the Kafka-to-Kafka tests: ``build_dataframe(spark, params, input_df)``.

It forwards every input record (key and value as text), as a user's transformation would after
its own logic: what matters to the tests is that each input record reaches the output once.
``build_orders`` is the one of a pipeline whose input value is decoded (an ``Order`` struct of the
reader schema): the order with its id times ten, for an Avro output of the same fields.
"""

from __future__ import annotations


def build_dataframe(spark, params, input_df):
    return input_df.selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")


def build_orders(spark, params, input_df):
    return input_df.selectExpr("CAST(key AS STRING) AS key",
                               "named_struct('id', value.id * 10, 'customer', value.customer) AS value")
