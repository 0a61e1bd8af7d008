"""Trigger -> visible for one 200-user batch of the example pipeline: Spark Connect vs spark-submit.

``./run bench connect_vs_submit [--rounds=5] [--users=200] [--kafka=embedded|apache]``

Issue 37: every spark-submit run starts a JVM and a SparkSession; a long-lived Spark Connect server
answers in well under a second. Each round runs the example pipeline's job
(``dags/eos_pipeline_job.py``, the batch's JSON events) as the DAG's submit task would, then the
commit, and stops the clock when a read_committed consumer sees every key: ``SparkEosSubmitOperator``
on ``local[2,3]`` (spark-submit per round) and ``SparkEosConnectOperator`` on one local Spark Connect
server (``kafka_eos_testing/spark_connect.py``, started once, before the rounds; its start reported
on its own). Each round is a new pipeline (the same input, nothing skipped); the median of
``--rounds`` per path, with the 1-minute load average beside every round (this machine is shared).
No scheduler: the DAG's task latency is not in these numbers.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks.bench_spark_vs_sink import start_kafka
from benchmarks.options import parse_options

OPTION_DEFAULTS: dict[str, Any] = {"rounds": 5, "users": 200, "kafka": "embedded"}
ROOT = Path(__file__).resolve().parents[1]
BATCH = "20260301T100000"


def _context(run_id: str) -> dict[str, Any]:
    dag_run = SimpleNamespace(dag_id="bench", run_id=run_id, logical_date=None,
                              run_after=datetime(2026, 3, 1, 10, tzinfo=timezone.utc))
    return {"dag_run": dag_run, "ti": SimpleNamespace(try_number=1, xcom_push=lambda key, value: None)}


def _round(operator_class: Any, conn_id: str, bootstrap: str, work: Path, keys: list[str],
           **extra: Any) -> float:
    """One checkpoint, submit + commit, until every key is visible; seconds."""
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from kafka_eos_testing.verify import assert_exactly_once, count_keys

    name = f"bench-{uuid.uuid4().hex[:8]}"
    operator = operator_class(
        task_id="submit", pipeline_id=name, topic=name, manifest_base_uri=str(work / "manifests"),
        application_callable=f"{ROOT / 'dags' / 'eos_pipeline_job.py'}:build_dataframe",
        application_params={"input_dir": str(work / "input"), "batch": BATCH, "partitions": 2},
        input_id=BATCH, kafka_eos_conn_id="kafka_eos_bench", conn_id=conn_id, **extra)
    started = time.monotonic()
    uri = operator.execute(_context(f"run-{name}"))
    with TransactionAdmin(KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap})) as admin:
        commit_checkpoint(admin, uri, committed_by="bench")
    counts = count_keys(bootstrap, name)
    elapsed = time.monotonic() - started
    assert_exactly_once(counts, keys)
    return elapsed


def _path(label: str, rounds: int, run_one: Any) -> dict[str, Any]:
    runs = []
    for i in range(rounds):
        load = os.getloadavg()[0]
        seconds = run_one()
        runs.append({"seconds": round(seconds, 2), "load_1m_before": round(load, 2)})
        print(f"  {label} round {i + 1}: {seconds:.1f}s (load {load:.1f})", flush=True)
    return {"median_s": round(statistics.median(r["seconds"] for r in runs), 2), "runs": runs}


def main(argv: list[str]) -> dict[str, Any]:
    opts = parse_options(argv, OPTION_DEFAULTS)
    sys.path.insert(0, str(ROOT / "dags"))
    from eos_sample_events import write_batch

    from airflow_provider_kafka_eos.operators.connect_submit import SparkEosConnectOperator
    from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator
    from kafka_eos_testing.spark_connect import SparkConnectServer

    work = Path(tempfile.mkdtemp(prefix="bench-connect-"))
    keys = write_batch(work / "input", BATCH, users=opts["users"])
    handle, bootstrap, kafka = start_kafka(opts["kafka"], 3)
    os.environ.update({
        "AIRFLOW_CONN_KAFKA_EOS_BENCH": json.dumps({"conn_type": "kafka_eos",
                                                    "extra": {"bootstrap.servers": bootstrap}}),
        "AIRFLOW_CONN_SPARK_BENCH": json.dumps({"conn_type": "spark", "host": "local[2,3]"}),
        "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    })
    try:
        submit = _path("spark-submit", opts["rounds"], lambda: _round(
            SparkEosSubmitOperator, "spark_bench", bootstrap, work, keys,
            conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"}))
        load = os.getloadavg()[0]
        with SparkConnectServer(log_path=work / "spark-connect.log") as server:
            host, port = server.url.removeprefix("sc://").split(":")
            os.environ["AIRFLOW_CONN_SPARK_CONNECT_BENCH"] = json.dumps(
                {"conn_type": "spark_connect", "host": host, "port": int(port)})
            connect = _path("spark-connect", opts["rounds"], lambda: _round(
                SparkEosConnectOperator, "spark_connect_bench", bootstrap, work, keys))
            connect["server_start_s"] = round(server.startup_s, 1)
            connect["server_start_load_1m"] = round(load, 2)
    finally:
        if handle is not None:
            handle.stop()
    return {"kafka": kafka, "records": len(keys), "rounds": opts["rounds"], "spark_submit": submit,
            "spark_connect": connect, "cpus": os.cpu_count()}
