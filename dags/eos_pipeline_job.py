"""The PySpark application of the example pipeline (what ``SparkEosSubmitOperator`` runs).

``build_dataframe(spark, params)`` reads one batch of JSON user-activity events
(``<input_dir>/<batch>/``; a batch with no folder is a batch with no events), enriches
each event with its category and points, aggregates per user, and returns the rows to write:
``key`` = ``<batch>:<user_id>`` (unique per batch, so exactly-once is checkable by key) and
``value`` = the user's aggregate as JSON. The exactly-once write itself is not here: the job
entry point hands this DataFrame to ``write_exactly_once``.
"""

from __future__ import annotations

import logging
from pathlib import Path

from airflow_provider_kafka_eos.kafka.errors import UsageError

EVENT_SCHEMA = "user_id string, event_type string, amount double, ts string"

# A small dimension table; in a real pipeline this is a table or file you join with.
EVENT_CATEGORIES = [
    ("view", "browse", 1),
    ("search", "browse", 1),
    ("add_to_cart", "intent", 5),
    ("purchase", "revenue", 20),
    ("refund", "revenue", -20),
]


OUTPUT_SCHEMA = "key string, value string"


def build_dataframe(spark, params):
    from pyspark.sql import functions as F

    batch = str(params["batch"])
    input_dir = Path(str(params["input_dir"]).removeprefix("file://"))
    if not input_dir.is_dir():
        # The same on every try: the job exits with its usage code and the task fails at once.
        raise UsageError(
            f"input_dir {input_dir} does not exist: write the events there (one folder per batch, "
            "e.g. python dags/eos_sample_events.py) or set the input_dir param",
            runbook="rerun-a-checkpoint",
        )
    folder = input_dir / batch
    if not folder.is_dir():
        logging.getLogger(__name__).warning("no events for batch %s (%s does not exist): nothing to write",
                                            batch, folder)
        return spark.createDataFrame([], OUTPUT_SCHEMA)
    events = spark.read.schema(EVENT_SCHEMA).json(str(folder))
    categories = spark.createDataFrame(EVENT_CATEGORIES, "event_type string, category string, points int")
    enriched = (
        events.filter(F.col("user_id").isNotNull())
        .join(F.broadcast(categories), "event_type", "left")
        .fillna({"category": "other", "points": 0, "amount": 0.0})
    )
    per_user = enriched.groupBy("user_id").agg(
        F.count(F.lit(1)).alias("events"),
        F.round(F.sum("amount"), 2).alias("amount"),
        F.sum("points").alias("points"),
        F.sort_array(F.collect_set("category")).alias("categories"),
        F.max("ts").alias("last_seen"),
    )
    rows = per_user.select(
        F.concat_ws(":", F.lit(batch), F.col("user_id")).alias("key"),
        F.to_json(F.struct(F.lit(batch).alias("batch"), *[F.col(c) for c in per_user.columns])).alias(
            "value"
        ),
    )
    return rows.repartition(int(params.get("partitions", 2)))
