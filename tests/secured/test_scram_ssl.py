"""SASL_SSL with SCRAM-SHA-512 on a real Kafka 4.4 node: a pipeline principal with ACLs only."""

from __future__ import annotations

import pytest
from secured_support import acl_entries, two_partition_pipeline, write_acl_file

from airflow_provider_kafka_eos.testing.apache_kafka.cluster import ApacheKafkaCluster

pytestmark = pytest.mark.secured



@pytest.fixture(scope="module")
def scram_node(tmp_path_factory):
    directory = tmp_path_factory.mktemp("scram")
    acl_file = write_acl_file(
        directory,
        {
            "users": {"admin": "admin-secret", "etl": "etl-secret"},
            "super_users": ["User:admin"],
            "acls": acl_entries("User:etl"),
        },
    )
    cluster = ApacheKafkaCluster(
        {"tls": True, "sasl": True, "sasl_mechanism": "SCRAM-SHA-512", "acl_file": acl_file,
         "data_dir": str(directory / "kafka")}
    )
    yield cluster
    cluster.stop()


def test_two_partition_pipeline_as_a_scram_user_over_tls(scram_node):
    config = scram_node.sasl_config("etl", "etl-secret")
    assert config["security.protocol"] == "SASL_SSL" and config["sasl.mechanism"] == "SCRAM-SHA-512"
    two_partition_pipeline(config, scram_node.admin_config())
