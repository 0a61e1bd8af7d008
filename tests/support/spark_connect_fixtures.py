"""A local Spark Connect server (``kafka_eos_testing/spark_connect.py``), shared by every Connect test.

Session scoped: the server takes ~30-40 s to start cold on this machine, so it starts once, on the
first test that asks for it, with Spark's Kafka connector (the Kafka-input pipeline's source).
``spark_connect`` is one client session per module (its artifacts, the provider's runtime zip among
them, are fixed per session; it is stopped after the module).
A fixture plugin (``pytest_plugins`` in tests/conftest.py).
"""

from __future__ import annotations

import pytest

from kafka_eos_testing.spark_connect import SparkConnectServer, connect_mode_restored


@pytest.fixture(scope="session")
def spark_connect_server(tmp_path_factory):
    """With Spark's Kafka connector on the server (the Kafka-input pipeline reads its range there):
    fetched once with Maven, as the spark-submit Kafka-input tests do."""
    from kafka_input_support import connector_jars

    with SparkConnectServer(log_path=tmp_path_factory.mktemp("spark-connect") / "server.log",
                            conf={"spark.jars": ",".join(connector_jars())}) as server:
        yield server


# Connect sessions set SPARK_CONNECT_MODE_ENABLED process-wide; each fixture puts it back
# (``connect_mode_restored``), or a later module's classic SparkSession is refused.
@pytest.fixture(scope="module")
def spark_connect(spark_connect_server):
    with connect_mode_restored():
        session = spark_connect_server.session()
        yield session
        session.stop()


@pytest.fixture
def connect_mode_scoped():
    """For a test whose code creates Connect sessions itself (the Connect operator's)."""
    with connect_mode_restored():
        yield
