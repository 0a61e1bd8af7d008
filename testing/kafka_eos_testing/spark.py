"""Spark helpers for tests, benchmarks and the demo of the writer (never used by the data path)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "commit_manifest",
    "job_arguments",
    "keyed_frame",
    "local_spark_session",
    "reported_manifest_uri",
    "spark_submit_command",
    "spark_submit_job",
]


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
    return spark.range(count, numPartitions=partitions).selectExpr(
        f"concat('{tag}-', cast(id as string)) as key", "cast(id * 7 as string) as value"
    )


def commit_manifest(bootstrap_or_config: Any, manifest: Any) -> list[Any]:
    """Commit a manifest's transactions the way the commit task does (without Airflow)."""
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig

    mapping = (
        {"bootstrap.servers": bootstrap_or_config}
        if isinstance(bootstrap_or_config, str)
        else bootstrap_or_config
    )
    with TransactionAdmin(KafkaClientConfig.from_mapping(mapping)) as admin:
        return admin.commit(manifest.committables)


def job_arguments(
    *,
    prefix: str,
    topic: str,
    checkpoint: int,
    manifest_base: str | os.PathLike[str],
    application: str,
    params: Mapping[str, Any],
) -> list[str]:
    """The job's command line for one checkpoint of pipeline ``prefix`` (pipeline id = prefix)."""
    return [
        "--pipeline-id", prefix, "--topic", topic, "--transactional-id-prefix", prefix,
        "--checkpoint-id", str(checkpoint), "--manifest-base-uri", str(manifest_base),
        "--application", application, "--params", json.dumps(dict(params)),
    ]  # fmt: skip


def spark_submit_command(
    arguments: list[str],
    *,
    client_config: Mapping[str, Any],
    work_dir: str | os.PathLike[str],
    master: str = "local[2,3]",
    conf: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    spark_submit: str | None = None,
    application_file: str | None = None,
) -> tuple[list[str], dict[str, str]]:
    """``(command, environment)`` that runs ``spark/job.py`` under spark-submit (client mode) the
    way SparkEosSubmitOperator does: the Kafka config in a 0600 file named by an environment
    variable, never on the command line. The driver runs this interpreter; ``conf`` may name
    another Python for the executors (``spark.pyspark.python``). ``application_file``: another
    entry point with the job's arguments (the fault tests' ``kafka_eos_testing/fault_job.py``)."""
    from airflow_provider_kafka_eos.spark import job as eos_job

    config_file = Path(tempfile.mkstemp(prefix="client-", suffix=".json", dir=work_dir)[1])
    config_file.chmod(0o600)
    config_file.write_text(json.dumps(dict(client_config)))
    run_env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    run_env[eos_job.CONFIG_FILE_ENV] = str(config_file)
    run_env.update(env or {})
    settings = {"spark.ui.enabled": "false", "spark.pyspark.driver.python": sys.executable, **(conf or {})}
    cmd = [spark_submit or str(Path(sys.executable).with_name("spark-submit")), "--master", master]
    for key, value in settings.items():
        cmd += ["--conf", f"{key}={value}"]
    return [*cmd, application_file or eos_job.__file__, *arguments], run_env


def spark_submit_job(
    arguments: list[str], *, timeout_s: float = 240, **options: Any
) -> subprocess.CompletedProcess:
    """Run the job (see ``spark_submit_command`` for the options) and wait; output captured as text."""
    cmd, env = spark_submit_command(arguments, **options)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)


def reported_manifest_uri(stdout: str) -> str | None:
    """The manifest URI from the job's ``KAFKA_EOS_MANIFEST_URI=`` line (None when it printed none)."""
    from airflow_provider_kafka_eos.spark import job as eos_job

    for line in stdout.splitlines():
        if line.startswith(eos_job.RESULT_PREFIX):
            return line[len(eos_job.RESULT_PREFIX) :].strip()
    return None
