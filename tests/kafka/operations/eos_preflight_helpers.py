"""Shared helpers for the preflight broker tests."""

from __future__ import annotations

from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig


def sasl_config(bootstrap: str, user: str) -> KafkaClientConfig:
    """SASL/PLAIN client config for one of the ACL file's users (password ``<user>-secret-pw``)."""
    return KafkaClientConfig.from_mapping(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": f"{user}-secret-pw",
        }
    )
