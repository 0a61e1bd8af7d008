"""Preflight's record-format rows against the session's real registry (Apicurio): an incompatible
schema or a missing subject fails preflight before any job runs, and nothing is registered.

``provider_logic``: run_preflight needs a broker, but these rows are the provider's checks against
the registry; no broker changes them (embedded broker only).
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import PreflightError
from airflow_provider_kafka_eos.kafka.operations.preflight import RetrySchedule, run_preflight
from airflow_provider_kafka_eos.kafka.registry.config import RecordFormats, RegistryConfig, SerdeSetting
from airflow_provider_kafka_eos.kafka.registry.resolver import registry_client

pytest.importorskip("confluent_kafka.schema_registry")
pytestmark = [pytest.mark.broker, pytest.mark.provider_logic]

V1 = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
BREAKING = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]})


def _preflight(broker, topic, formats, **kwargs):
    return run_preflight(KafkaClientConfig.from_mapping({"bootstrap.servers": broker.bootstrap}),
                         transactional_id_prefix="pf-", topics=[topic], transaction_timeout_ms=300_000,
                         job_duration_budget_s=60,
                         commit_schedule=RetrySchedule.of(retries=1, retry_delay=10, execution_timeout=30),
                         record_formats=formats, **kwargs)


def test_preflight_refuses_an_incompatible_value_schema_and_registers_nothing(
        kafka_broker, schema_registry, registry_topic):
    from confluent_kafka.schema_registry import Schema

    registry = RegistryConfig(schema_registry.url)
    client = registry_client(registry)
    client.register_schema(f"{registry_topic}-value", Schema(V1, "AVRO"))
    client.set_compatibility(f"{registry_topic}-value", "BACKWARD")
    formats = RecordFormats(value=SerdeSetting(format="avro", schema=BREAKING, auto_register=True),
                            registry=registry)
    with pytest.raises(PreflightError) as err:
        _preflight(kafka_broker, registry_topic, formats)
    assert f"value format ({registry_topic}): subject '{registry_topic}-value'" in str(err.value)
    assert "incompatible" in str(err.value) and "kafka-eos-txn runbook schema-registry" in str(err.value)
    assert client.get_versions(f"{registry_topic}-value") == [1]


def test_preflight_reports_each_encoded_part_without_registering(kafka_broker, schema_registry,
                                                                  registry_topic):
    registry = RegistryConfig(schema_registry.url)
    formats = RecordFormats(key=SerdeSetting(format="avro", schema=json.dumps("string")),
                            value=SerdeSetting(format="avro", schema=V1, auto_register=True),
                            registry=registry)
    report = _preflight(kafka_broker, registry_topic, formats, raise_on_failure=False)
    rows = {c.name: c for c in report.checks if "format" in c.name}
    assert rows[f"key format ({registry_topic})"].status == "fail"
    assert "does not exist and registration is off" in rows[f"key format ({registry_topic})"].message
    value = rows[f"value format ({registry_topic})"]
    assert value.status == "ok" and "the job will register it" in value.message
    assert registry_client(registry).get_subjects().count(f"{registry_topic}-value") == 0  # dry run
