"""client.properties refusals that need no Java (the parity with Java itself: test_java_properties_parity)."""

from __future__ import annotations

import pytest

from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import ConfigError
from airflow_provider_kafka_eos.kafka.java_properties import read_properties_file


def test_utf8_non_ascii_is_refused_naming_the_line_and_the_escape(tmp_path):
    path = tmp_path / "client.properties"
    path.write_bytes("security.protocol=SASL_SSL\nsasl.password=p\u00e4ss\n".encode())
    with pytest.raises(ConfigError) as caught:
        read_properties_file(path)
    text = str(caught.value)
    assert str(path) in text and "line 2" in text and "ISO-8859-1" in text and "\\u00e4" in text
    assert "p\u00e4ss" not in text


def test_iso_8859_1_bytes_read_as_java_reads_them(tmp_path):
    path = tmp_path / "client.properties"
    path.write_bytes(b"client.id=caf\xe9\n")
    assert read_properties_file(path) == {"client.id": "caf\u00e9"}


def test_malformed_unicode_escape_names_the_file(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("client.id=\\u12g4\n")
    with pytest.raises(ConfigError, match=r"client\.properties: malformed \\uXXXX escape"):
        read_properties_file(path)


@pytest.mark.parametrize(
    ("jaas", "reason"),
    [
        ('M required username="u" password=123;', "Value not specified for key 'password'"),
        ('M required username="u" password="p"', "not terminated by semi-colon"),
        ('A required u="x" p="y"; B required u="x" p="y";', "holds 2 login module entries"),
        ('M mandatory username="u";', "Invalid login module control flag 'mandatory'"),
    ],
)
def test_jaas_kafka_refuses_is_refused_with_its_reason(jaas, reason):
    with pytest.raises(ConfigError, match=r"sasl\.jaas\.config") as caught:
        KafkaClientConfig.from_properties(
            {"bootstrap.servers": "b:9092", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas}
        )
    assert reason in str(caught.value)
