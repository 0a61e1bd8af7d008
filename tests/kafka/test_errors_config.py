"""Errors read as "<id>: <cause>. Next step: <runbook>"; client config translation and redaction."""

from __future__ import annotations

import pickle

import pytest

from airflow_provider_kafka_eos import PROJECT_URL
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig, is_secret_key
from airflow_provider_kafka_eos.kafka.errors import (
    AuthorizationError,
    BrokerUnreachableError,
    ConfigError,
    DataLossError,
    KafkaEosError,
    ManifestError,
    ProducerFencedError,
    TransactionTimeoutRiskError,
    UnknownTransactionError,
    UsageError,
)

# -- errors ----------------------------------------------------------------------------------


def test_error_text_names_transaction_cause_and_runbook():
    err = DataLossError("the transaction was aborted.", transactional_id="orders-3-17")
    assert str(err) == (
        "orders-3-17: the transaction was aborted. Next step: kafka-eos-txn runbook data-loss "
        f"({PROJECT_URL}/blob/main/docs/runbook/data-loss.md)"
    )
    assert err.runbook_url == f"{PROJECT_URL}/blob/main/docs/runbook/data-loss.md"


def test_error_text_without_transaction_and_with_explicit_runbook():
    err = KafkaEosError("something odd", runbook="acls")
    assert str(err) == (
        "something odd. Next step: kafka-eos-txn runbook acls "
        f"({PROJECT_URL}/blob/main/docs/runbook/acls.md)"
    )


@pytest.mark.parametrize(
    ("cls", "page"),
    [
        (DataLossError, "data-loss"),
        (ProducerFencedError, "producer-fenced"),
        (UnknownTransactionError, "unknown-transaction"),
        (BrokerUnreachableError, "broker-unreachable"),
        (ManifestError, "malformed-manifest"),
        (AuthorizationError, "missing-acl"),
        (TransactionTimeoutRiskError, "transaction-timeout-risk"),
    ],
)
def test_each_error_points_at_its_runbook_page(cls, page):
    from airflow_provider_kafka_eos import runbook

    err = cls("x", transactional_id="t-0-0")
    assert err.runbook == page
    assert runbook.read(page), f"{page} is named by {cls.__name__} but the package does not carry it"
    assert err.runbook_url.endswith(f"/docs/runbook/{page}.md")


def test_errors_survive_pickling_with_their_fields():
    """Spark ships executor exceptions to the driver by pickling them."""
    err = DataLossError("lost", transactional_id="p-0-1", outcomes=["x"])
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is DataLossError
    assert str(again) == str(err)
    assert again.transactional_id == "p-0-1" and again.outcomes == ["x"]


def test_usage_error_is_a_kafka_eos_error():
    assert issubclass(UsageError, KafkaEosError)


# -- config: mapping --------------------------------------------------------------------------


SASL_EXTRA = {
    "bootstrap.servers": "b1:9092,b2:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "svc",
    "sasl.password": "s3cr3t-pw",
    "ssl.ca.location": "/etc/ca.pem",
    "ssl.certificate.location": "/etc/client.pem",
    "ssl.key.location": "/etc/client.key",
    "ssl.key.password": "key-pw",
    "client.id": "etl",
    "group.id": "ignored-by-admin",
}


def test_mapping_translates_for_both_clients():
    config = KafkaClientConfig.from_mapping(SASL_EXTRA)
    assert config.bootstrap_servers == "b1:9092,b2:9093"
    confluent = config.confluent()
    assert confluent["sasl.mechanisms"] == "SCRAM-SHA-512"  # Java spelling normalised
    assert confluent["group.id"] == "ignored-by-admin"
    assert config.kafka_python() == {
        "bootstrap_servers": ["b1:9092", "b2:9093"],
        "security_protocol": "SASL_SSL",
        "client_id": "etl",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "svc",
        "sasl_plain_password": "s3cr3t-pw",
        "ssl_cafile": "/etc/ca.pem",
        "ssl_certfile": "/etc/client.pem",
        "ssl_keyfile": "/etc/client.key",
        "ssl_password": "key-pw",
    }


def test_kafka_python_output_is_accepted_by_kafka_python():
    """Every kwarg we emit is one kafka-python's admin client knows (it rejects unknown ones)."""
    from kafka.admin import KafkaAdminClient

    emitted = set(KafkaClientConfig.from_mapping(SASL_EXTRA).kafka_python())
    assert emitted <= set(KafkaAdminClient.DEFAULT_CONFIG)


def test_unknown_key_is_refused_by_name():
    with pytest.raises(ConfigError, match=r"'sasl\.mechanizm'"):
        KafkaClientConfig.from_mapping({"bootstrap.servers": "h:1", "sasl.mechanizm": "PLAIN"})


@pytest.mark.parametrize(
    ("mapping", "needle"),
    [
        ({}, "'bootstrap.servers' is missing"),
        ({"bootstrap.servers": "nohostport"}, "not host:port"),
        ({"bootstrap.servers": "h:1", "security.protocol": "TLS"}, "'security.protocol'"),
        ({"bootstrap.servers": "h:1", "sasl.mechanisms": "MAGIC"}, "'sasl.mechanisms'"),
        (
            {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN"},
            "needs 'sasl.username'",
        ),
    ],
)
def test_invalid_configurations_name_the_key(mapping, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        KafkaClientConfig.from_mapping(mapping)


def test_untranslatable_for_kafka_python_raises_instead_of_weakening():
    config = KafkaClientConfig.from_mapping({"bootstrap.servers": "h:1", "ssl.keystore.location": "/k.p12"})
    assert config.confluent()["ssl.keystore.location"] == "/k.p12"
    with pytest.raises(ConfigError, match=r"'ssl\.keystore\.location'"):
        config.kafka_python()


def test_oauthbearer_oidc_builds_a_token_provider_and_unsecured_jwt_is_refused():
    oidc = KafkaClientConfig.from_mapping(
        {
            "bootstrap.servers": "h:1",
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": "cid",
            "sasl.oauthbearer.client.secret": "very-secret",
            "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
        }
    )
    provider = oidc.kafka_python()["sasl_oauth_token_provider"]
    assert callable(provider.token)
    assert "very-secret" not in repr(provider)
    unsecured = KafkaClientConfig.from_mapping(
        {"bootstrap.servers": "h:1", "sasl.mechanisms": "OAUTHBEARER", "sasl.oauthbearer.config": "sub=x"}
    )
    with pytest.raises(ConfigError, match="oidc"):
        unsecured.kafka_python()


def test_disabled_hostname_verification_is_translated():
    config = KafkaClientConfig.from_mapping(
        {
            "bootstrap.servers": "h:1",
            "security.protocol": "SSL",
            "ssl.endpoint.identification.algorithm": "none",
        }
    )
    assert config.kafka_python()["ssl_check_hostname"] is False


# -- config: secrets ----------------------------------------------------------------------------


def test_redacted_and_repr_hide_every_secret():
    config = KafkaClientConfig.from_mapping(SASL_EXTRA)
    redacted = config.redacted()
    assert redacted["sasl.password"] == "***" and redacted["ssl.key.password"] == "***"
    assert redacted["sasl.username"] == "svc"
    for text in (repr(config), str(config), str(redacted)):
        assert "s3cr3t-pw" not in text and "key-pw" not in text


@pytest.mark.parametrize(
    "key",
    [
        "sasl.password",
        "ssl.key.password",
        "sasl.oauthbearer.client.secret",
        "sasl.jaas.config",
        "ssl.key.pem",
    ],
)
def test_secret_keys_are_recognised(key):
    assert is_secret_key(key)


def test_plain_keys_are_not_secret():
    assert not is_secret_key("bootstrap.servers")
    assert not is_secret_key("sasl.username")


# -- config: client.properties ------------------------------------------------------------------


def test_properties_file_with_jaas_plain(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text(
        "# comment\n"
        "bootstrap.servers=b1:9092, b2:9092\n"
        "security.protocol = SASL_SSL\n"
        "sasl.mechanism: PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        # The file holds p\\\"w;d: Properties.load reads p\"w;d, then JAAS p"w;d (as Kafka reads it).
        '    username="alice" password="p\\\\\\"w;d";\n'
        "ssl.truststore.type=PEM\n"
        "ssl.truststore.location=/etc/ca.pem\n"
        "ssl.endpoint.identification.algorithm=https\n"
        "key.serializer=org.apache.kafka.common.serialization.StringSerializer\n"
    )
    config = KafkaClientConfig.from_properties_file(path)
    assert config.kafka_python() == {
        "bootstrap_servers": ["b1:9092", "b2:9092"],
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": 'p"w;d',
        "ssl_cafile": "/etc/ca.pem",
    }
    assert config.confluent()["sasl.username"] == "alice"
    assert 'p"w;d' not in repr(config)


def test_properties_scram_module(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text(
        "bootstrap.servers=h:9092\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="bob" password="pw";\n'
    )
    kp = KafkaClientConfig.from_properties_file(path).kafka_python()
    assert (kp["sasl_mechanism"], kp["sasl_plain_username"], kp["sasl_plain_password"]) == (
        "SCRAM-SHA-256",
        "bob",
        "pw",
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("bootstrap.servers=h:1\nssl.truststore.location=/x.jks\n", "'ssl.truststore.location'"),
        ("bootstrap.servers=h:1\nlinger.mss=5\n", "'linger.mss'"),
        (
            'bootstrap.servers=h:1\nsasl.jaas.config=com.example.CustomLoginModule required a="b";\n',
            "CustomLoginModule",
        ),
    ],
)
def test_untranslatable_properties_name_the_key(tmp_path, text, needle):
    path = tmp_path / "client.properties"
    path.write_text(text)
    with pytest.raises(ConfigError, match=needle) as info:
        KafkaClientConfig.from_properties_file(path)
    assert str(path) in str(info.value)


def test_missing_properties_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        KafkaClientConfig.from_properties_file(tmp_path / "nope.properties")


def test_disabled_certificate_verification_keeps_the_client_certificate(tmp_path):
    """kafka-python ignores ssl_certfile once an ssl_context is given: the context must carry it."""
    import subprocess

    key, cert = tmp_path / "client.key", tmp_path / "client.pem"
    made = subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=client",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        capture_output=True,
    )
    if made.returncode != 0:
        pytest.skip("needs the openssl command to make a client certificate")
    config = KafkaClientConfig.from_mapping(
        {
            "bootstrap.servers": "h:1",
            "security.protocol": "SSL",
            "enable.ssl.certificate.verification": "false",
            "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key),
        }
    )
    context = config.kafka_python()["ssl_context"]
    assert context.verify_mode.name == "CERT_NONE"
    missing = KafkaClientConfig.from_mapping(
        {
            "bootstrap.servers": "h:1",
            "security.protocol": "SSL",
            "enable.ssl.certificate.verification": "false",
            "ssl.certificate.location": str(tmp_path / "absent.pem"),
        }
    )
    with pytest.raises(ConfigError, match="could not be loaded"):
        missing.kafka_python()
