"""A real 3-node Apache Kafka 4.4 cluster for the cluster fault tests (``tests/system/cluster``).

One cluster per session (starting three JVMs costs ~45 s on 2 cores); each test leaves it as it
found it: every node running and every partition fully replicated (:func:`healthy`), because
the next test kills nodes again. The tests run only in the ``cluster`` pass of ``./run test``
(``KAFKA_EOS_TEST_KAFKA=apache3``): elsewhere they skip, naming the 3-node cluster they need.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from cluster_helpers import healthy

from kafka_eos_testing.pytest_plugin import KAFKA_KIND_ENV, kafka_kind


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The session's 3-node cluster (``ApacheKafkaCluster``: kill_node / stop_node / start_node)."""
    if kafka_kind() != "apache3":
        pytest.skip(
            f"needs a 3-node Apache Kafka cluster whose nodes the test can kill "
            f"(${KAFKA_KIND_ENV}=apache3; the kafka under test is {kafka_kind()})"
        )
    from kafka_eos_testing.apache_kafka import ApacheKafkaCluster

    cluster = ApacheKafkaCluster({"nodes": 3, "data_dir": str(tmp_path_factory.mktemp("cluster") / "data")})
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster(kafka_cluster) -> Iterator[object]:
    """The session cluster, healthy before the test and restored to health after it."""
    healthy(kafka_cluster)
    yield kafka_cluster
    healthy(kafka_cluster)


@pytest.fixture
def kafka_eos_conn(monkeypatch, unique_name):
    """An Airflow ``kafka_eos`` connection (env var): ``kafka_eos_conn(cluster) -> conn id``."""

    def make(broker) -> str:
        conn_id = unique_name("kafka_eos").replace("-", "_")
        extra = broker.client_config()
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kafka_eos", "extra": extra})
        )
        return conn_id

    return make


@pytest.fixture(scope="session")
def spark(kafka_cluster):
    """One local session for the cluster tests, with Spark's Kafka connector on its classpath (the
    Kafka-input job reads with it; the jars must be there when the JVM starts). It depends on the
    cluster so that where the cluster skips, no JVM is started and no jar is fetched for nothing
    (session fixtures are set up before function ones, whatever the order of a test's arguments)."""
    from kafka_input_support import connector_jars

    from kafka_eos_testing.spark import local_spark_session

    return local_spark_session(spark__jars=",".join(connector_jars()))
