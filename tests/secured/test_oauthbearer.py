"""SASL_SSL OAUTHBEARER on a real Kafka 4.4 node validating JWTs against a loopback JWKS (OIDC).

The provider fetches tokens by client credentials from the loopback token endpoint (librdkafka's
``oidc`` method on the producer path, the provider's token provider on the kafka-python path);
the principal is the token's subject.
"""

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

from airflow_provider_kafka_eos.kafka.errors import AuthenticationError
from kafka_eos_testing.apache_kafka.cluster import ApacheKafkaCluster
from kafka_eos_testing.apache_kafka.oidc import OidcServer

pytestmark = pytest.mark.secured


@pytest.fixture(scope="module")
def idp():
    with OidcServer() as server:
        yield server


@pytest.fixture(scope="module")
def oauth_node(tmp_path_factory, idp):
    directory = tmp_path_factory.mktemp("oauth")
    acl_file = write_acl_file(
        directory, {"users": {}, "super_users": ["User:admin"], "acls": acl_entries("User:etl")}
    )
    cluster = ApacheKafkaCluster(
        {
            "tls": True,
            "sasl": True,
            "sasl_mechanism": "OAUTHBEARER",
            "oidc_jwks_url": idp.jwks_url,
            "acl_file": acl_file,
            "data_dir": str(directory / "kafka"),
        }
    )
    yield cluster
    cluster.stop()


def _oauth_config(node, idp, client_id, secret):
    return node.client_config(
        **{
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": client_id,
            "sasl.oauthbearer.client.secret": secret,
            "sasl.oauthbearer.token.endpoint.url": idp.token_url,
        }
    )


@pytest.mark.parametrize("path", PRODUCER_PATHS)
def test_two_partition_pipeline_as_a_token_subject(oauth_node, idp, path):
    secret = idp.add_client("etl")
    before = idp.issued
    two_partition_pipeline(_oauth_config(oauth_node, idp, "etl", secret), oauth_node.admin_config(), path)
    assert idp.issued > before  # both client paths fetched tokens from the endpoint


def test_lingering_scan_and_trigger_as_a_token_subject(oauth_node, idp, monkeypatch, tmp_path):
    config = _oauth_config(oauth_node, idp, "etl", idp.add_client("etl"))
    lingering_scan_and_trigger(monkeypatch, tmp_path, config, oauth_node.admin_config())


def test_preflight_names_the_token_subject_as_principal(oauth_node, idp, monkeypatch):
    config = _oauth_config(oauth_node, idp, "etl", idp.add_client("etl"))
    preflight_as(monkeypatch, config, "User:etl")
    preflight_as(monkeypatch, config, "User:etl", own=False)


def test_wrong_client_secret_is_named_on_both_paths(oauth_node, idp):
    idp.add_client("etl-wrong")
    config = _oauth_config(oauth_node, idp, "etl-wrong", "not-the-secret")
    for _path, message, _took in refusal_on_both_paths(config, AuthenticationError):
        assert idp.token_url in message and "etl-wrong" in message
        assert "not-the-secret" not in message


def test_token_endpoint_down_is_named(oauth_node, idp):
    from kafka_eos_testing.apache_kafka.cluster import free_port

    config = _oauth_config(oauth_node, idp, "etl", "any")
    config["sasl.oauthbearer.token.endpoint.url"] = f"http://127.0.0.1:{free_port()}/token"
    for _path, message, _took in refusal_on_both_paths(config, AuthenticationError):
        assert config["sasl.oauthbearer.token.endpoint.url"] in message


def test_expired_token_is_named(oauth_node, idp):
    secret = idp.add_client("etl-expired", lifetime_s=-120)
    config = _oauth_config(oauth_node, idp, "etl-expired", secret)
    kafka_python, librdkafka = refusal_on_both_paths(config, AuthenticationError)
    # The broker refuses it on the kafka-python path; librdkafka refuses the expired token itself.
    refused = f"{oauth_node.bootstrap} refused the OAUTHBEARER token of client id 'etl-expired'"
    assert refused in kafka_python[1]
    assert "no OAUTHBEARER token for client id 'etl-expired'" in librdkafka[1]
    assert "Must supply an unexpired token" in librdkafka[1]
