"""The async half of the deferrable lingering-transaction sensor.

A deferred sensor frees its worker slot; the triggerer runs this loop instead. Everything the
trigger carries is JSON (the connection *id*, never its secrets) because the triggerer stores
and re-creates it from ``serialize()``. The Kafka clients are blocking, so each poll runs in a
thread (``asyncio.to_thread``) and the triggerer's event loop never blocks.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_kafka_eos.kafka import errors as eos_errors
from airflow_provider_kafka_eos.kafka.operations.findings_store import (
    XCOM_MAX_FINDINGS,
    write_findings,
    xcom_payload,
)
from airflow_provider_kafka_eos.kafka.operations.lso_stalls import LsoStallTracker
from airflow_provider_kafka_eos.kafka.operations.scan import Findings, ScanSpec, scan

STATUS_FOUND = "found"
STATUS_ERROR = "error"


def scan_with_connection(conn_id: str, spec: ScanSpec, tracker: LsoStallTracker | None = None) -> Findings:
    """One blocking poll through the connection ``conn_id`` (shared by the sensor and the trigger).

    A spec without a manifest store uses the connection's (``manifest_base_uri`` in its extra);
    with neither, the scan fails naming the setting, rather than calling everything an orphan.
    """
    import dataclasses

    from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
    from airflow_provider_kafka_eos.tasks.metrics import record_scan

    hook = KafkaEosHook(kafka_eos_conn_id=conn_id)
    base, _ = hook.manifest_store_setting(spec.manifest_base_uri)  # the spec's, else the connection's
    spec = dataclasses.replace(spec, manifest_base_uri=base)
    with hook.transaction_admin() as admin:
        findings = scan(admin, spec, tracker=tracker, access=hook.store_access(base))
    record_scan(findings)  # kafka_eos.lingering.found / kafka_eos.lso.oldest_stall_age, every poll
    return findings


def bounded_findings(findings: Findings, findings_base_uri: str | None, limit: int, *,
                     conn_id: str) -> dict[str, Any]:
    """What the sensor pushes to XCom and the trigger's event carries (both land in the metadata
    database): counts and at most ``limit`` findings per list. When more were found, all of them
    are written to a JSON file under ``findings_base_uri`` (default: the manifest store the scan
    read, the sensor's or its connection's) whose URI the payload names, reached with the store
    credentials of connection ``conn_id``."""
    from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook

    uri = None
    full = findings.to_dict()
    findings_base_uri = findings_base_uri or findings.manifest_base_uri
    if findings_base_uri and max(len(findings.transactions), len(findings.lso_stalls)) > limit:
        access = KafkaEosHook(kafka_eos_conn_id=conn_id).store_access(findings_base_uri)
        uri = write_findings(findings_base_uri, findings, full, access=access)
    return xcom_payload(findings, limit=limit, findings_uri=uri, full=full)


def error_event(err: BaseException) -> dict[str, Any]:
    """An error as event payload: enough to re-raise the same ``KafkaEosError`` in the worker."""
    if isinstance(err, eos_errors.KafkaEosError):
        return {
            "status": STATUS_ERROR,
            "error_type": type(err).__name__,
            "cause": err.cause,
            "transactional_id": err.transactional_id,
            "runbook": err.runbook,
            "message": str(err),
        }
    return {
        "status": STATUS_ERROR,
        "error_type": type(err).__name__,
        "cause": f"lingering-transaction poll failed: {type(err).__name__}: {err}",
        "transactional_id": None,
        "runbook": "troubleshooting",
        "message": f"{type(err).__name__}: {err}",
    }


def error_from_event(event: dict[str, Any]) -> eos_errors.KafkaEosError:
    """Rebuild the error a trigger reported, as the same class when it is one of ours."""
    cls = getattr(eos_errors, str(event.get("error_type")), None)
    if not (isinstance(cls, type) and issubclass(cls, eos_errors.KafkaEosError)):
        cls = eos_errors.KafkaEosError
    return cls(
        str(event.get("cause") or event.get("message") or "the lingering-transaction trigger failed"),
        transactional_id=event.get("transactional_id"),
        runbook=event.get("runbook"),
    )


class LingeringTransactionTrigger(BaseTrigger):
    """Polls until a lingering transaction (or LSO stall) is found; yields the findings once.

    Yields ``{"status": "found", "findings": {...}}`` (bounded: :func:`bounded_findings`) or
    ``{"status": "error", ...}`` and stops.
    """

    def __init__(
        self,
        *,
        kafka_eos_conn_id: str,
        spec: dict[str, Any],
        poll_interval: float = 60.0,
        tracker: dict[str, Any] | None = None,
        findings_base_uri: str | None = None,
        xcom_max_findings: int = XCOM_MAX_FINDINGS,
    ) -> None:
        super().__init__()
        self.kafka_eos_conn_id = kafka_eos_conn_id
        self.findings_base_uri = findings_base_uri
        self.xcom_max_findings = int(xcom_max_findings)
        self.spec = ScanSpec.from_dict(spec).to_dict()  # validate now, in the worker, not in the triggerer
        self.poll_interval = float(poll_interval)
        self.tracker = LsoStallTracker.from_dict(tracker).to_dict()

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "kafka_eos_conn_id": self.kafka_eos_conn_id,
                "spec": self.spec,
                "poll_interval": self.poll_interval,
                "tracker": self.tracker,
                "findings_base_uri": self.findings_base_uri,
                "xcom_max_findings": self.xcom_max_findings,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        spec = ScanSpec.from_dict(self.spec)
        tracker = LsoStallTracker.from_dict(self.tracker)
        while True:
            try:
                findings = await asyncio.to_thread(
                    scan_with_connection, self.kafka_eos_conn_id, spec, tracker
                )
            except Exception as err:  # reported to the task, which fails with the same error
                self.log.error("lingering-transaction poll failed: %s", err)
                yield TriggerEvent(error_event(err))
                return
            if findings:
                try:
                    payload = await asyncio.to_thread(
                        functools.partial(bounded_findings, findings, self.findings_base_uri,
                                          self.xcom_max_findings, conn_id=self.kafka_eos_conn_id)
                    )
                except Exception as err:  # the findings file could not be written
                    yield TriggerEvent(error_event(err))
                    return
                yield TriggerEvent({"status": STATUS_FOUND, "findings": payload})
                return
            self.log.info(
                "no lingering transactions (%s); next poll in %.0f s", findings.summary(), self.poll_interval
            )
            await asyncio.sleep(self.poll_interval)
