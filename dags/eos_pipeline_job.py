"""The PySpark application of the example pipeline (what ``SparkEosSubmitOperator`` runs).

``build_dataframe(spark, params)`` reads one batch of JSON user-activity events
(``<input_dir>/<batch>/``), enriches
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

# What "no input" is, decided before Spark starts (the DAG's run_batch asks; see docs/ui.md).
NO_INPUT_DIR, NO_BATCH_FOLDER, EMPTY_BATCH = "no-input-dir", "no-batch-folder", "empty-batch"


def local_input_dir(input_dir: str) -> Path:
    return Path(str(input_dir).removeprefix("file://"))


def input_problem(input_dir: str, batch: str) -> tuple[str, str] | None:
    """``(kind, reason)`` when this batch has no input, else None.

    Kinds: NO_INPUT_DIR (the folder of batches is missing: a setup error), NO_BATCH_FOLDER (no
    ``<input_dir>/<batch>/``), EMPTY_BATCH (the folder holds no event file; names starting with
    ``.`` or ``_``, such as Spark's ``_SUCCESS``, do not count). The example reads local folders,
    visible to the Airflow worker; a pipeline reading object storage asks its filesystem instead.
    """
    root = local_input_dir(input_dir)
    if not root.is_dir():
        return NO_INPUT_DIR, (
            f"input_dir {root} does not exist: write the events there (one folder per batch, "
            "e.g. python dags/eos_sample_events.py) or set the input folder param"
        )
    folder = root / batch
    if not folder.is_dir():
        return NO_BATCH_FOLDER, f"batch {batch!r} has no input: {folder} does not exist"
    if not any(p.is_file() and not p.name.startswith((".", "_")) for p in folder.iterdir()):
        return EMPTY_BATCH, f"batch {batch!r} has no input: {folder} holds no event file"
    return None


def build_dataframe(spark, params):
    from pyspark.sql import functions as F

    batch = str(params["batch"])
    input_dir = local_input_dir(str(params["input_dir"]))
    if not input_dir.is_dir():
        # The same on every try: the job exits with its usage code and the task fails at once.
        raise UsageError(
            f"input_dir {input_dir} does not exist: write the events there (one folder per batch, "
            "e.g. python dags/eos_sample_events.py) or set the input_dir param",
            runbook="rerun-a-checkpoint",
        )
    folder = input_dir / batch
    if not folder.is_dir():
        # The DAG skips or fails such a run before Spark starts (run_batch); this is for callers
        # that submit the job some other way: say it loudly, write nothing.
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
