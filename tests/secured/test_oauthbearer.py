"""SASL_SSL OAUTHBEARER on a real Kafka 4.4 node validating JWTs against a loopback JWKS (OIDC).

The provider fetches tokens by client credentials from the loopback token endpoint (librdkafka's
``oidc`` method on the producer path, the provider's token provider on the kafka-python path);
the principal is the token's subject.
"""

from __future__ import annotations

import pytest
from secured_support import acl_entries, two_partition_pipeline, write_acl_file

from airflow_provider_kafka_eos.testing.apache_kafka.cluster import ApacheKafkaCluster
from airflow_provider_kafka_eos.testing.apache_kafka.oidc import OidcServer

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


def test_two_partition_pipeline_as_a_token_subject(oauth_node, idp):
    secret = idp.add_client("etl")
    before = idp.issued
    two_partition_pipeline(_oauth_config(oauth_node, idp, "etl", secret), oauth_node.admin_config())
    assert idp.issued > before  # both client paths fetched tokens from the endpoint
