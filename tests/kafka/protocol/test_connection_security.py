"""The naming rules of kafka/protocol/connection_security.py that need no server.

The probes against real servers: tests/system/secured.
"""

from __future__ import annotations

import ssl

import pytest

from airflow_provider_kafka_eos.kafka.errors import (
    AuthenticationError,
    ConfigError,
    SecurityProtocolMismatchError,
    TlsCertificateError,
)
from airflow_provider_kafka_eos.kafka.protocol import connection_security as cs

CONFIG = {
    "bootstrap.servers": "b1:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanisms": "SCRAM-SHA-512",
    "sasl.username": "etl",
    "sasl.password": "s3cret",
}


@pytest.mark.parametrize(
    ("code", "text", "expected"),
    [
        (-181, "ssl://b1:9093/bootstrap: SSL handshake failed", True),
        (-169, "sasl_ssl://b1:9093/1: Authentication failed", True),
        (-195, "ssl://b1:9093/bootstrap: error:0A000086:SSL routines::certificate verify failed", True),
        (-195, "b1:9092/bootstrap: Connect to ipv4#10.0.0.1:9092 failed: Connection refused", False),
        (-187, "1/1 brokers are down", False),
    ],
)
def test_which_librdkafka_errors_are_refusals(code, text, expected):
    assert cs.is_security_failure(code, text) is expected


def test_librdkafka_wrong_credentials_name_user_and_mechanism_not_the_password():
    error = cs.explain_librdkafka(
        CONFIG,
        -169,
        "sasl_ssl://b1:9093/bootstrap: SASL authentication error: Authentication failed during "
        "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
    )
    assert isinstance(error, AuthenticationError)
    assert "b1:9093 refused the credentials of SASL user 'etl' (SCRAM-SHA-512)" in str(error)
    assert "s3cret" not in str(error)


def test_librdkafka_sasl_at_a_listener_without_sasl():
    error = cs.explain_librdkafka(
        CONFIG,
        -169,
        "sasl_ssl://b1:9093/bootstrap: SASL SCRAM-SHA-512 mechanism handshake failed: Broker: "
        "Request not valid in current SASL state: broker's supported mechanisms: ",
    )
    assert isinstance(error, SecurityProtocolMismatchError)
    assert "b1:9093 is a listener without SASL" in str(error)


def test_librdkafka_client_certificate_refused():
    error = cs.explain_librdkafka(
        {**CONFIG, "security.protocol": "SSL"},
        -195,
        "ssl://b1:9093/bootstrap: Receive failed: error:0A000412:SSL routines::ssl/tls alert bad certificate",
    )
    assert isinstance(error, TlsCertificateError)
    assert "b1:9093 requires a client certificate (mutual TLS)" in str(error)


def test_a_named_error_inside_a_client_failure_is_kept():
    named = AuthenticationError("the token endpoint https://idp/token refused client id 'etl'")
    wrapper = ConnectionError("bootstrap failed")
    wrapper.__cause__ = named
    assert cs.is_handshake_refusal(wrapper)
    assert cs.explain("b1:9093", CONFIG, wrapper) is named


def test_ssl_reason_read_from_a_kept_text():
    assert cs._ssl_reason(OSError("[SSL: SSLV3_ALERT_BAD_CERTIFICATE] sslv3 alert bad certificate")) == (
        "SSLV3_ALERT_BAD_CERTIFICATE"
    )
    assert cs._ssl_reason(ssl.SSLEOFError()) is not None
    assert cs._ssl_reason(OSError("connection refused")) is None


def test_client_file_that_is_missing_names_setting_and_path(tmp_path):
    missing = tmp_path / "ca.pem"
    with pytest.raises(ConfigError, match=r"ssl\.ca\.location: the CA file .*ca\.pem cannot be read"):
        cs.check_client_files({"ssl.ca.location": str(missing)})
