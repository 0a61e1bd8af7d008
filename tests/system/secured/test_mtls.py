"""SSL with required client certificates on a real Kafka 4.4 node: the principal is the DN."""

from __future__ import annotations

import pytest
from secured_support import (
    PRODUCER_PATHS,
    acl_entries,
    lingering_scan_and_trigger,
    preflight_as,
    refusal_on_both_paths,
    two_partition_pipeline,
    write_acl_file,
)

from airflow_provider_kafka_eos.kafka.errors import SecurityProtocolMismatchError, TlsCertificateError
from kafka_eos_testing.apache_kafka.cluster import ApacheKafkaCluster

pytestmark = pytest.mark.secured

ETL_DN = "CN=etl,O=kafka-eos"


@pytest.fixture(scope="module")
def mtls_node(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mtls")
    acl_file = write_acl_file(
        directory,
        {"users": {}, "super_users": ["User:CN=admin,O=kafka-eos"], "acls": acl_entries(f"User:{ETL_DN}")},
    )
    cluster = ApacheKafkaCluster({"mtls": True, "acl_file": acl_file, "data_dir": str(directory / "kafka")})
    yield cluster
    cluster.stop()


@pytest.mark.parametrize("path", PRODUCER_PATHS)
def test_two_partition_pipeline_as_a_certificate_principal(mtls_node, path):
    etl = mtls_node.issue_client_certificate("etl")
    assert etl.subject == ETL_DN
    config = mtls_node.mtls_config(etl)
    assert config["security.protocol"] == "SSL"
    two_partition_pipeline(config, mtls_node.admin_config(), path)


def test_lingering_scan_and_trigger_as_a_certificate_principal(mtls_node, monkeypatch, tmp_path):
    config = mtls_node.mtls_config(mtls_node.issue_client_certificate("etl"))
    lingering_scan_and_trigger(monkeypatch, tmp_path, config, mtls_node.admin_config())


def test_preflight_names_the_certificate_dn_as_principal(mtls_node, monkeypatch):
    config = mtls_node.mtls_config(mtls_node.issue_client_certificate("etl"))
    preflight_as(monkeypatch, config, f"User:{ETL_DN}")
    preflight_as(monkeypatch, config, f"User:{ETL_DN}", own=False)


def test_a_certificate_without_acls_is_refused(mtls_node):
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from airflow_provider_kafka_eos.kafka.errors import AuthorizationError

    stranger = mtls_node.issue_client_certificate("stranger")
    config = KafkaClientConfig.from_mapping(mtls_node.mtls_config(stranger))
    with TransactionAdmin(config) as admin, pytest.raises(AuthorizationError):
        admin.describe(["secured-not-mine"])


def test_sasl_client_at_a_listener_without_sasl_is_named(mtls_node):
    etl = mtls_node.issue_client_certificate("etl-sasl")
    config = mtls_node.mtls_config(
        etl,
        **{
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "etl",
            "sasl.password": "etl-secret",
        },
    )
    for _path, message, _took in refusal_on_both_paths(config, SecurityProtocolMismatchError):
        assert (
            f"{mtls_node.bootstrap} is a listener without SASL but security.protocol is SASL_SSL" in message
        )


def test_missing_client_certificate_is_named(mtls_node):
    config = mtls_node.client_config()
    for _path, message, _took in refusal_on_both_paths(config, TlsCertificateError):
        assert f"{mtls_node.bootstrap} requires a client certificate (mutual TLS)" in message


def test_spark_cluster_job_writes_as_a_certificate_principal(
    mtls_node, spark_cluster, monkeypatch, capfd, caplog, tmp_path
):
    """Executors without the provider, on the standalone cluster, write over mTLS as the DN ``etl``:
    the client key travels as PEM inside the job (never a path the executor host must have)."""
    from secured_support import pipeline_on_the_spark_cluster

    etl = mtls_node.issue_client_certificate("etl")
    config = mtls_node.mtls_config(etl)
    key_pem = etl.key.read_text()
    key_body = "".join(key_pem.strip().splitlines()[1:-1])[:64]
    pipeline_on_the_spark_cluster(
        spark_cluster, monkeypatch, capfd, caplog, tmp_path, config, mtls_node.admin_config(), [key_body]
    )
