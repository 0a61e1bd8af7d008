"""TLS client files named before any connection: missing, a directory, a wrong key password.

Both client paths (the kafka-python wire and the librdkafka producer) check the files where the
client runs; no broker is contacted (the bootstrap address is a closed loopback port).
"""

from __future__ import annotations

import time

import pytest
from cryptography.hazmat.primitives import serialization

from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import ConfigError
from airflow_provider_kafka_eos.kafka.producers.librdkafka import PartitionTransaction, TransactionProtocol
from airflow_provider_kafka_eos.kafka.protocol.wire import Wire
from kafka_eos_testing.apache_kafka.certs import CertificateAuthority
from kafka_eos_testing.apache_kafka.cluster import free_port

pytestmark = pytest.mark.secured


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("client-files")
    ca = CertificateAuthority(root, name="client files CA")
    client = ca.issue("etl", common_name="etl", client=True)
    key = serialization.load_pem_private_key(client.key.read_bytes(), password=None)
    encrypted = root / "etl-encrypted.key"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"right-key-password"),
        )
    )
    return {"ca": ca.ca_file, "cert": client.cert, "key": client.key, "encrypted": encrypted, "root": root}


def _both_paths(settings):
    config = KafkaClientConfig.from_mapping(
        {"bootstrap.servers": f"127.0.0.1:{free_port()}", "security.protocol": "SSL", **settings}
    )
    messages = []
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        Wire(config, connect_timeout_ms=5000)
    messages.append(str(caught.value))
    with pytest.raises(ConfigError) as caught:
        PartitionTransaction(
            confluent_config=config.confluent(),
            transactional_id="secured-files",
            topic="secured-files",
            transaction_timeout_ms=60_000,
            protocol=TransactionProtocol(transaction_version=2, end_txn_version=5),
            describe=lambda ids: {},
        )
    messages.append(str(caught.value))
    assert time.monotonic() - started < 1.0
    return messages


def test_missing_client_key_is_named(files):
    missing = files["root"] / "nope.key"
    for message in _both_paths(
        {
            "ssl.ca.location": str(files["ca"]),
            "ssl.certificate.location": str(files["cert"]),
            "ssl.key.location": str(missing),
        }
    ):
        assert (
            f"ssl.key.location: the client key {missing} cannot be read (No such file or directory)"
            in message
        )


def test_wrong_key_password_is_named_without_the_password(files):
    for message in _both_paths(
        {
            "ssl.ca.location": str(files["ca"]),
            "ssl.certificate.location": str(files["cert"]),
            "ssl.key.location": str(files["encrypted"]),
            "ssl.key.password": "wrong-key-password",
        }
    ):
        assert f"the client key {files['encrypted']} cannot be loaded" in message
        assert "ssl.key.password is wrong or missing" in message
        assert "wrong-key-password" not in message and "right-key-password" not in message


def test_right_key_password_passes_the_check(files):
    from airflow_provider_kafka_eos.kafka.protocol.connection_security import check_client_files

    check_client_files(
        {
            "ssl.ca.location": str(files["ca"]),
            "ssl.certificate.location": str(files["cert"]),
            "ssl.key.location": str(files["encrypted"]),
            "ssl.key.password": "right-key-password",
        }
    )
