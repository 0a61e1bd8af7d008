"""A Spark standalone cluster (master + 2 workers, separate JVMs on loopback) for the session, shared by
tests/system/spark_cluster and the conformance suite (tests/system/conformance); started on the first
test that asks for it. A fixture plugin (``pytest_plugins`` in tests/conftest.py).

Its executors run a cached Python environment with PySpark, pyarrow, confluent-kafka and
kafka-python but without this provider (``kafka_eos_testing/spark_cluster.py``), so every test here also
proves that the write brings its own code to the executors.
(tests/system/secured has its own cluster, with its own fixture of the same name.)
"""

from __future__ import annotations

import subprocess

import pytest

from kafka_eos_testing.spark_cluster import start_cluster


@pytest.fixture(scope="session")
def spark_cluster_session(tmp_path_factory):
    cluster = start_cluster(workers=2, work_dir=tmp_path_factory.mktemp("spark-cluster"))
    try:
        # Outside the repository and with no PYTHONPATH, as the executors run it.
        probe = subprocess.run(
            [cluster.executor_python, "-c", "import airflow_provider_kafka_eos"],
            capture_output=True, text=True, timeout=60, cwd=cluster.work_dir, env={"PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        assert probe.returncode != 0, "the executors' Python must not have this provider installed"
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def spark_cluster(spark_cluster_session):
    """The session's cluster with both workers running (a test that killed one gets it back)."""
    spark_cluster_session.ensure_workers()
    yield spark_cluster_session
    spark_cluster_session.ensure_workers()
