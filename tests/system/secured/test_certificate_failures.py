"""Certificate refusals named within 1 s, on both client paths, against a loopback TLS server.

Before: "no Kafka broker at HOST:PORT answered within 10.0 s" after the whole connect timeout.
"""

from __future__ import annotations

import time

import pytest
from tls_server import tls_server

from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import TlsCertificateError
from airflow_provider_kafka_eos.kafka.protocol.wire import Wire
from kafka_eos_testing.apache_kafka.certs import CertificateAuthority

pytestmark = pytest.mark.secured

LIMIT_S = 1.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    root = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority(root / "ca", name="kafka-eos test CA")
    other = CertificateAuthority(root / "other", name="some other CA")
    return {
        "ca": ca,
        "other": other,
        "good": ca.issue("good", common_name="broker", names=("127.0.0.1", "localhost")),
        "wrong-name": ca.issue("wrong-name", common_name="broker", names=("broker-1.kafka.internal",)),
        "expired": ca.issue(
            "expired", common_name="broker", names=("127.0.0.1",), not_before_days=-3, valid_days=-1
        ),
    }


def _wire_error(address: str, cafile) -> tuple[Exception, float]:
    config = KafkaClientConfig.from_mapping(
        {"bootstrap.servers": address, "security.protocol": "SSL", "ssl.ca.location": str(cafile)}
    )
    started = time.monotonic()
    with pytest.raises(TlsCertificateError) as caught:
        Wire(config, connect_timeout_ms=10_000)
    took = time.monotonic() - started
    print(f"refusal TlsCertificateError kafka-python {took * 1000:.0f} ms: {caught.value.cause}")
    return caught.value, took


def test_untrusted_ca_is_named_within_a_second(pki):
    with tls_server(pki["good"].cert, pki["good"].key) as address:
        error, took = _wire_error(address, pki["other"].ca_file)
    text = str(error)
    assert took < LIMIT_S, took
    assert f"the TLS certificate of {address} is not trusted" in text
    assert str(pki["other"].ca_file) in text and "ssl.ca.location" in text
    assert f"openssl s_client -connect {address}" in text
    assert "kafka-eos-txn runbook tls-certificate" in text


def test_host_name_not_in_the_certificate_names_host_and_certificate_names(pki):
    with tls_server(pki["wrong-name"].cert, pki["wrong-name"].key) as address:
        error, took = _wire_error(address, pki["ca"].ca_file)
    assert took < LIMIT_S, took
    assert "does not name the host '127.0.0.1' (it names: broker-1.kafka.internal)" in str(error)


def test_expired_certificate_is_named(pki):
    with tls_server(pki["expired"].cert, pki["expired"].key) as address:
        error, took = _wire_error(address, pki["ca"].ca_file)
    assert took < LIMIT_S, took
    assert "is not valid now (certificate has expired)" in str(error)


def _librdkafka_error(address: str, cafile) -> tuple[Exception, float]:
    from airflow_provider_kafka_eos.kafka.producers.librdkafka import (
        PartitionTransaction,
        TransactionProtocol,
    )

    config = KafkaClientConfig.from_mapping(
        {"bootstrap.servers": address, "security.protocol": "SSL", "ssl.ca.location": str(cafile)}
    )
    txn = PartitionTransaction(
        confluent_config=config.confluent(),
        transactional_id="secured-cert-check",
        topic="secured-cert-check",
        transaction_timeout_ms=60_000,
        protocol=TransactionProtocol(transaction_version=2, end_txn_version=5),
        describe=lambda ids: {},
        init_timeout_s=10,
    )
    started = time.monotonic()
    with pytest.raises(TlsCertificateError) as caught:
        txn.begin()
    took = time.monotonic() - started
    print(f"refusal TlsCertificateError librdkafka {took * 1000:.0f} ms: {caught.value.cause}")
    return caught.value, took


@pytest.mark.parametrize(
    ("case", "ca", "expected"),
    [
        ("good", "other", "is not trusted"),
        ("wrong-name", "ca", "does not name the host '127.0.0.1' (it names: broker-1.kafka.internal)"),
        ("expired", "ca", "is not valid now (certificate has expired)"),
    ],
)
def test_librdkafka_producer_names_the_certificate_failure(pki, case, ca, expected):
    with tls_server(pki[case].cert, pki[case].key) as address:
        error, took = _librdkafka_error(address, pki[ca].ca_file)
    assert took < LIMIT_S, took
    assert expected in str(error) and address in str(error)
