"""The real-Kafka launcher (``kafka_eos_testing/apache_kafka``): its failure modes and ``./run kafka``.

These start their own JVMs, so they run in the real-Kafka passes only (``KAFKA_EOS_TEST_KAFKA=apache``
or ``apache3``); the cache checks need no JVM and run everywhere.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest
from confluent_kafka import Producer

from kafka_eos_testing.apache_kafka import (
    ApacheKafkaCluster,
    JarFetchError,
    KafkaStartError,
    cache_dir,
    fetch_jars,
)
from kafka_eos_testing.pytest_plugin import kafka_kind
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.apache_kafka

needs_apache = pytest.mark.skipif(
    kafka_kind() not in ("apache", "apache3"),
    reason="needs real Apache Kafka 4.4 (KAFKA_EOS_TEST_KAFKA=apache): starts its own Kafka JVMs",
)


def test_cache_location_is_overridable(monkeypatch, tmp_path):
    monkeypatch.setenv("KAFKA_EOS_KAFKA_CACHE", str(tmp_path / "jars"))
    assert cache_dir() == tmp_path / "jars"


def test_a_damaged_cache_without_maven_is_one_clear_error(monkeypatch, tmp_path):
    """A cache whose listing does not match its jars is fetched again; with no Maven, one error names both."""
    cache = tmp_path / "jars"
    (cache / "libs").mkdir(parents=True)
    (cache / "libs" / "kafka_2.13-4.4.0.jar").write_bytes(b"truncated")
    (cache / "COMPLETE").write_text("kafka_2.13-4.4.0.jar 123456\n")
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    with pytest.raises(JarFetchError) as err:
        fetch_jars(cache)
    assert "org.apache.kafka:kafka_2.13:4.4.0" in str(err.value)
    assert str(cache) in str(err.value)
    assert "Maven (mvn) is not installed" in str(err.value)


@needs_apache
def test_a_node_that_cannot_start_names_its_port_and_log(tmp_path):
    """The second node's port is taken: the error shows that node's port and log, and no node is left."""
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        taken = blocker.getsockname()[1]
        listen = [("127.0.0.1", 0), ("127.0.0.1", taken), ("127.0.0.1", 0)]
        cluster = ApacheKafkaCluster(
            {"nodes": 3, "data_dir": str(tmp_path / "data"), "listen": listen}, start=False
        )
        with pytest.raises(KafkaStartError) as err:
            cluster.start()
    assert f"port {taken}" in str(err.value)
    assert "node-2" in str(err.value)
    assert all(not node.running() for node in cluster.nodes)


@needs_apache
def test_run_kafka_prints_listening_and_stops_every_node_on_sigterm(tmp_path):
    data_dir = tmp_path / "data"
    command = [
        sys.executable,
        "-m",
        "kafka_eos_testing.apache_kafka.cli",
        "--data-dir",
        str(data_dir),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith("listening on 127.0.0.1:"), process.stderr.read()
        bootstrap = line.removeprefix("listening on ").strip()
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "cli-probe"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("cli-topic", key=b"k1", value=b"v")
        producer.commit_transaction(30)
        del producer
        assert_exactly_once(count_keys(bootstrap, "cli-topic"), ["k1"])
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "Kafka Server started" in (data_dir / "node-1" / "server.log").read_text()
    leftovers = subprocess.run(["pgrep", "-f", f"kafka.Kafka {data_dir}"], capture_output=True, text=True)
    assert leftovers.stdout == "", f"node JVMs left running: {leftovers.stdout}"
    assert not os.path.exists(data_dir / "node-2")
