"""Preflight's record-format rows: would the registry accept this pipeline's schemas?

Read-only, as all of preflight: the same checks as the writer's resolution (the subject exists or
may be registered, the schema is compatible under the subject's rule), with nothing registered
(``resolve_schema(dry_run=True)``). One row per topic and key/value that has a registry format; a
refusal is a failing row naming the subject, the registry and the next step, so an incompatible
schema stops the DAG at its first task, before the Spark job prepares anything.

Rows are plain dicts (``PreflightCheck``'s fields) so that this module and ``preflight.py`` do
not import each other.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import ConfigError, SchemaRegistryError
from airflow_provider_kafka_eos.kafka.registry.config import RecordFormats
from airflow_provider_kafka_eos.kafka.registry.resolver import registry_client, resolve_schema

__all__ = ["RUNBOOK_REGISTRY", "record_format_findings"]

RUNBOOK_REGISTRY = "schema-registry"


def record_format_findings(formats: RecordFormats | None, topics: Iterable[str]) -> list[dict[str, Any]]:
    """``PreflightCheck`` fields (name, status, message, runbook, details), one per encoded part."""
    if formats is None or not formats.uses_registry or formats.registry is None:
        return []
    findings: list[dict[str, Any]] = []
    client = None
    for topic in topics:
        for part, setting in (("key", formats.key), ("value", formats.value)):
            if not setting.uses_registry:
                continue
            name = f"{part} format ({topic})"
            try:
                client = client or registry_client(formats.registry)
                resolved = resolve_schema(formats.registry, setting, topic, is_key=part == "key",
                                          client=client, dry_run=True)
            except (SchemaRegistryError, ConfigError) as exc:
                findings.append({"name": name, "status": "fail", "message": exc.cause,
                                 "runbook": RUNBOOK_REGISTRY, "details": {}})
                continue
            message = (f"{setting.format.value}, subject {resolved.subject!r}: "
                       + (f"schema id {resolved.schema_id}" if resolved.schema_id is not None
                          else "compatible; the job will register it (auto_register)"))
            findings.append({"name": name, "status": "ok", "message": message, "runbook": RUNBOOK_REGISTRY,
                             "details": resolved.describe()})
    return findings
