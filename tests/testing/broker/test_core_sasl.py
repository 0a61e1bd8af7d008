"""SASL_PLAINTEXT (PLAIN) when the broker has an ACL file: right password in, wrong one out."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.broker, pytest.mark.broker_double]


@pytest.fixture
def sasl_broker(kafka_broker_factory, tmp_path):
    acl_file = tmp_path / "acls.json"
    acl_file.write_text(
        json.dumps(
            {
                "users": {"admin": "admin-secret", "alice": "alice-secret"},
                "super_users": ["User:admin"],
                "acls": [
                    {
                        "principal": "User:alice",
                        "resource_type": "TOPIC",
                        "pattern_type": "PREFIXED",
                        "name": "alice-",
                        "operation": "ALL",
                    }
                ],
            }
        )
    )
    return kafka_broker_factory(acl_file=str(acl_file))


def test_authenticated_user_round_trip(sasl_broker, unique_name):
    topic = unique_name("alice")
    config = sasl_broker.sasl_config("alice", "alice-secret")
    producer = Producer(config)
    producer.produce(topic, key=b"k1", value=b"v")
    assert producer.flush(30) == 0
    assert_exactly_once(count_keys(config, topic), [b"k1"])


def test_wrong_password_is_refused(sasl_broker):
    errors = []
    admin = AdminClient({**sasl_broker.sasl_config("alice", "not-the-password"), "error_cb": errors.append})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=2)
    admin.poll(0)  # deliver the error callbacks
    assert any(e.code() == KafkaError._AUTHENTICATION and "Authentication failed" in e.str() for e in errors)


def test_wrong_password_gets_sasl_authentication_failed_and_the_connection_closes(sasl_broker, raw_client):
    client = raw_client(sasl_broker.bootstrap)
    handshake = client.request(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse, 1)
    assert (handshake.error_code, handshake.mechanisms) == (0, ["PLAIN"])
    response = client.request(
        SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00wrong"), SaslAuthenticateResponse, 2
    )
    assert response.error_code == 58  # SASL_AUTHENTICATION_FAILED
    assert "wrong" not in (response.error_message or "")  # the attempted password is never echoed
    assert client.is_closed_by_peer()


def test_requests_before_authentication_close_the_connection(sasl_broker, raw_client):
    client = raw_client(sasl_broker.bootstrap)
    client.correlation_id = 0
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    request.with_header(correlation_id=1, client_id="raw")
    payload = bytes(request.encode(version=12, header=True))
    client.send_bytes(len(payload).to_bytes(4, "big") + payload)
    assert client.is_closed_by_peer()  # nothing may come back before SASL


def test_principal_reaches_the_authorizer(sasl_broker, unique_name):
    """alice may only write ``alice-*`` topics (an ACL); elsewhere she gets TOPIC_AUTHORIZATION_FAILED."""
    producer = Producer({**sasl_broker.sasl_config("alice", "alice-secret"), "message.timeout.ms": 5000})
    errors = []
    producer.produce(unique_name("bob"), key=b"k", value=b"v", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(15)
    assert errors and errors[0] is not None and "authoriz" in errors[0].str().lower()


def test_handshake_v0_takes_a_raw_plain_token(sasl_broker, raw_client):
    """SaslHandshake v0 clients send the token as a bare frame (no Kafka header) and get a bare reply."""
    client = raw_client(sasl_broker.bootstrap)
    handshake = client.request(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse, 0)
    assert handshake.error_code == 0
    token = b"\x00admin\x00admin-secret"
    client.send_bytes(len(token).to_bytes(4, "big") + token)
    assert client.read_bytes(4) == b"\x00\x00\x00\x00"  # an empty frame: authenticated
    response = client.request(
        MetadataRequest(topics=None, allow_auto_topic_creation=False), MetadataResponse, 12
    )
    assert response.brokers[0].node_id == 1
