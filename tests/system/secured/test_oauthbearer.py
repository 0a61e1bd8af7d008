"""SASL_SSL OAUTHBEARER on a real Kafka 4.4 node validating JWTs against a loopback JWKS (OIDC).

The provider fetches tokens by client credentials from the loopback token endpoint (librdkafka's
``oidc`` method on the producer path, the provider's token provider on the kafka-python path);
the principal is the token's subject.
"""

from __future__ import annotations

import re

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
            # A session ends with its token: clients must re-authenticate with a fresh one (KIP-368).
            "max_reauth_ms": 600_000,
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
    # Both refuse the expired token before sending it (the provider's token check; librdkafka's own).
    assert re.search(r"issued client id 'etl-expired' a token that expired 12[01] s ago", kafka_python[1])
    assert "no OAUTHBEARER token for client id 'etl-expired'" in librdkafka[1]
    assert "Must supply an unexpired token" in librdkafka[1]


def test_clock_skewed_token_is_named_within_a_second(oauth_node, idp):
    """An identity provider whose clock runs 10 minutes ahead: iat/nbf lie in the future."""
    secret = idp.add_client("etl-skewed", skew_s=600)
    config = _oauth_config(oauth_node, idp, "etl-skewed", secret)
    kafka_python, librdkafka = refusal_on_both_paths(config, AuthenticationError)
    assert re.search(r"a token whose nbf is (599|600) s ahead of this machine's clock", kafka_python[1])
    assert "clocks of the client, the identity provider and the broker" in librdkafka[1]
    assert "etl-skewed" in librdkafka[1] and secret not in librdkafka[1] + kafka_python[1]


SHORT_LIFETIME_S = 5


def test_token_refresh_during_a_long_task_on_both_client_libraries(oauth_node, idp):
    """Two transactions (librdkafka producer; Arrow producer over kafka-python) open across three
    lifetimes of a 5 s token on a broker that ends a session with its token: each client library
    must fetch new tokens and re-authenticate its connections (librdkafka: its own OIDC refresh;
    kafka-python: KIP-368 re-authentication through the provider's token provider) while the task
    keeps writing; then commit both and count."""
    import time

    import pyarrow as pa
    from confluent_kafka.admin import AdminClient, NewTopic
    from secured_support import unique

    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from airflow_provider_kafka_eos.kafka.producers.arrow import ArrowPartitionTransaction
    from airflow_provider_kafka_eos.kafka.producers.librdkafka import (
        PartitionTransaction,
        TransactionProtocol,
    )
    from kafka_eos_testing.verify import assert_exactly_once, count_keys

    secret = idp.add_client("etl", lifetime_s=SHORT_LIFETIME_S)
    try:
        config = _oauth_config(oauth_node, idp, "etl", secret)
        topic = unique("refresh")
        creator = AdminClient(oauth_node.admin_config())
        creator.create_topics([NewTopic(topic, 2, 1)], operation_timeout=10)[topic].result(timeout=15)
        client = KafkaClientConfig.from_mapping(config)
        expected: list[bytes] = []
        started, before = time.monotonic(), len(idp.fetches)
        with TransactionAdmin(client) as admin:
            protocol = TransactionProtocol.from_admin(admin)
            rdkafka = PartitionTransaction(
                confluent_config=client.confluent(), transactional_id=unique("refresh-rd"), topic=topic,
                transaction_timeout_ms=120_000, protocol=protocol, describe=admin.describe, init_timeout_s=30,
            )  # fmt: skip
            arrow = ArrowPartitionTransaction(
                admin=admin, transactional_id=unique("refresh-arrow"), topic=topic,
                transaction_timeout_ms=120_000, protocol=protocol,
            )  # fmt: skip
            rdkafka.begin()
            arrow.begin()
            for round_ in range(3):
                keys = [f"{topic}/rd/{round_}/{i}".encode() for i in range(20)]
                rdkafka.write_rows(keys, [b"v"] * len(keys), partitions=[0] * len(keys))
                rdkafka.flush()
                expected += keys
                keys = [f"{topic}/arrow/{round_}/{i}".encode() for i in range(20)]
                arrow.write_columns(
                    pa.array(keys, pa.binary()),
                    pa.array([b"v"] * len(keys), pa.binary()),
                    partitions=pa.array([1] * len(keys), pa.int32()),
                )
                arrow.flush()
                expected += keys
                # Wait (bounded) until this round's tokens are over: new ones must have been issued,
                # and the next writes go over re-authenticated sessions.
                seen, round_started = idp.issued_to.get("etl", 0), time.monotonic()
                deadline = round_started + 4 * SHORT_LIFETIME_S
                while (
                    idp.issued_to.get("etl", 0) <= seen or time.monotonic() < round_started + SHORT_LIFETIME_S
                ):
                    assert time.monotonic() < deadline, f"no token refresh within {4 * SHORT_LIFETIME_S} s"
                    time.sleep(0.2)
            committables = [rdkafka.prepare(), arrow.prepare()]
            assert None not in committables
            outcomes = admin.commit(committables)
        assert [o.outcome for o in outcomes] == ["committed", "committed"]
        assert time.monotonic() - started > 3 * SHORT_LIFETIME_S  # the task outlived three tokens
        fetched = [how for who, how in idp.fetches[before:] if who == "etl"]
        # each library fetched a token per round at least (librdkafka: Basic auth; kafka-python: form)
        assert fetched.count("basic") >= 3 and fetched.count("form") >= 3, fetched
        assert_exactly_once(count_keys(config, topic), expected)
    finally:
        idp.add_client("etl")  # later tests get the usual 5-minute tokens
