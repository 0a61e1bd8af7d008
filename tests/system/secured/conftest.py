"""One Spark standalone cluster for the secured pass (started on first use, shared by the modes).

Its executors run the cached provider-less Python (``kafka_eos_testing/spark_cluster.py``): the secured
write brings its code, its secrets and its certificates to them through the job alone.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    from kafka_eos_testing.spark_cluster import start_cluster

    cluster = start_cluster(workers=1, worker_cores=2, work_dir=tmp_path_factory.mktemp("spark-cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()
