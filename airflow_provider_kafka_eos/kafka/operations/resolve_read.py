"""The read-only actions of a resolution request: list, describe, preflight.

Nothing here changes a transaction; the rows they return are the same for the CLI and the manual
resolution DAG. :func:`description_row` is the one form a described transaction takes in a row
(the hanging-transaction listing uses it too).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_kafka_eos.kafka.operations.resolution_request import (
    Progress,
    ResolutionRequest,
    ResolutionResult,
)
from airflow_provider_kafka_eos.kafka.operations.resolve_commit import capabilities_of
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import wall_clock_ms
from airflow_provider_kafka_eos.runbook import reference as runbook_reference

if TYPE_CHECKING:  # an action may use any of the facade's operations: its type is the facade
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin


def wire_value(obj: Any) -> Any:
    """Enum members (kafka-python's TransactionState) as their wire value."""
    return getattr(obj, "value", obj)


def partitions_text(partitions: Iterable[Any]) -> str:
    return ",".join(sorted(f"{p.topic}-{p.partition}" for p in partitions))


def description_row(desc: Any) -> dict[str, Any]:
    start = getattr(desc, "start_time_ms", -1)
    age = round((wall_clock_ms() - start) / 1000, 1) if start is not None and start >= 0 else None
    return {
        "transactional_id": desc.transactional_id,
        "state": wire_value(desc.state),
        "producer_id": desc.producer_id,
        "producer_epoch": desc.producer_epoch,
        "timeout_ms": desc.timeout_ms,
        "age_s": age,
        "partitions": partitions_text(desc.partitions),
    }


def action_list(
    admin: TransactionAdmin, request: ResolutionRequest, progress: Progress | None
) -> ResolutionResult:
    listings = admin.list(
        prefixes=list(request.prefixes) or None,
        states=list(request.states) or None,
        min_age_ms=request.min_age_ms,
    )
    rows = [
        {"transactional_id": t.transactional_id, "producer_id": t.producer_id, "state": wire_value(t.state)}
        for t in sorted(listings, key=lambda t: t.transactional_id)
    ]
    return ResolutionResult(
        rows,
        f"{len(rows)} transaction(s)",
        True,
        ("transactional_id", "producer_id", "state"),
        warnings=visibility_warnings(admin, request.prefixes),
    )


def visibility_warnings(admin: TransactionAdmin, prefixes: Sequence[str]) -> list[str]:
    """Kafka hides what the principal may not DESCRIBE; say so instead of a silent short list."""
    from airflow_provider_kafka_eos.kafka.admin.acl_check import visibility_gaps

    wire = getattr(admin, "wire", None)
    return visibility_gaps(wire, list(prefixes)) if wire is not None else []


def action_describe(
    admin: TransactionAdmin, request: ResolutionRequest, progress: Progress | None
) -> ResolutionResult:
    if request.transactional_id:
        ids = [request.transactional_id]
    else:
        ids = sorted({t.transactional_id for t in admin.list(prefixes=list(request.prefixes))})
    descriptions = admin.describe(ids) if ids else {}
    rows = [description_row(descriptions[i]) for i in ids if i in descriptions]
    return ResolutionResult(
        rows,
        f"{len(rows)} transaction(s) described",
        True,
        ("transactional_id", "state", "producer_id", "producer_epoch", "timeout_ms", "age_s", "partitions"),
    )


def action_preflight(
    admin: TransactionAdmin, request: ResolutionRequest, progress: Progress | None, config: Any,
    record_formats: Any = None,
) -> ResolutionResult:
    """Capabilities + the ACLs of ``config``'s principal (+ the timeout limit when one is given, + the
    record formats' registry rows for each topic: ``registry_preflight.py``, read-only)."""
    from airflow_provider_kafka_eos.kafka.admin.acl_check import (
        check_acls,
        pipeline_requirements,
        principal_of,
    )
    from airflow_provider_kafka_eos.kafka.operations.preflight import (
        PreflightCheck,
        PreflightReport,
        check_acl_findings,
        check_transaction_timeout,
        check_two_phase_commit,
    )

    caps = capabilities_of(admin)
    checks = []
    acls_dict = []
    two_pc = request.two_phase_commit
    acls_by_prefix = {}
    for prefix in request.prefixes:
        requirements = pipeline_requirements(prefix, request.topics, two_phase_commit=two_pc)
        acls = check_acls(admin.wire, requirements, principal_of(config) if config is not None else None)
        acls_by_prefix[prefix] = acls
        acls_dict.append(acls.to_dict())
        checks.extend(check_acl_findings(acls))
    if request.transaction_timeout_ms is not None:
        checks.append(check_transaction_timeout(request.transaction_timeout_ms, caps))
    # With --two-phase-commit every prefix's TWO_PHASE_COMMIT ACL is judged (and 2PC is required).
    for prefix in request.prefixes if two_pc else request.prefixes[:1]:
        checks.extend(
            check_two_phase_commit(
                caps,
                acls_by_prefix[prefix] if two_pc else None,
                prefix,
                request.transaction_timeout_ms or 0,
                required=two_pc,
            )
        )
    from airflow_provider_kafka_eos.kafka.operations.registry_preflight import record_format_findings

    checks.extend(PreflightCheck(**row) for row in record_format_findings(record_formats, request.topics))
    report = PreflightReport(checks, caps.to_dict(), {"checks": acls_dict})
    rows = [
        {
            "check": c.name,
            "status": c.status,
            "message": c.message,
            "runbook": runbook_reference(c.runbook) if c.runbook else "",
        }
        for c in report.checks
    ]
    return ResolutionResult(
        rows,
        ("preflight OK" if report.ok else "preflight FAILED") + "\n" + caps.render(),
        report.ok,
        ("check", "status", "message", "runbook"),
    )
