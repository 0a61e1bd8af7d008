"""Preflight: would this pipeline, as configured, be exactly-once on this cluster?

It runs before any data is written (the first task of a pipeline DAG, or
``kafka-eos-txn preflight``) and answers with a :class:`PreflightReport`: one check a
line, each ok / warn / fail with the numbers and the runbook page. Blockers raise
:class:`PreflightError`, because a pipeline that can lose data must not start.

The subtle check is the data-loss window: a prepared transaction must be committed before
``start + transaction.timeout.ms``, or the broker aborts it (semantics reference, section 3).
The worst case from the first record to the commit is the Spark job's duration budget plus
everything the commit task may spend: every attempt running up to its execution timeout and
every retry delay, with Airflow's exponential backoff (whose jitter can double a delay).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from airflow_provider_kafka_eos.kafka.admin.acl_check import (
    MISSING,
    OK,
    AclCheckResult,
    check_acls,
    pipeline_requirements,
    principal_of,
)
from airflow_provider_kafka_eos.kafka.admin.capabilities import ClusterCapabilities, open_wire
from airflow_provider_kafka_eos.kafka.errors import PreflightError
from airflow_provider_kafka_eos.kafka.operations.registry_preflight import record_format_findings
from airflow_provider_kafka_eos.kafka.registry.config import RecordFormats
from airflow_provider_kafka_eos.runbook import reference as runbook_reference

PASS, WARN, FAIL = "ok", "warn", "fail"
RUNBOOK_TIMEOUT = "transaction-timeout-risk"
RUNBOOK_ACL = "missing-acl"
RUNBOOK_2PC = "two-phase-commit"
# Below this margin between the worst case and the timeout we warn: clocks, the broker's
# 10 s abort scan and scheduler latency all eat into it.
SAFETY_MARGIN_PERCENT = 10
AIRFLOW_DEFAULT_RETRY_DELAY_S = 300.0
AIRFLOW_MAX_RETRY_DELAY_S = 24 * 60 * 60


def _seconds(value: float | timedelta | None) -> float | None:
    if value is None:
        return None
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


@dataclass(frozen=True)
class RetrySchedule:
    """How long the commit task may take at worst: Airflow's retry settings, in seconds."""

    retries: int = 0
    retry_delay_s: float = AIRFLOW_DEFAULT_RETRY_DELAY_S
    retry_exponential_backoff: float = 0.0
    max_retry_delay_s: float | None = None
    execution_timeout_s: float | None = None

    @classmethod
    def of(
        cls,
        *,
        retries: int = 0,
        retry_delay: float | timedelta | None = None,
        retry_exponential_backoff: float | bool = 0.0,
        max_retry_delay: float | timedelta | None = None,
        execution_timeout: float | timedelta | None = None,
    ) -> RetrySchedule:
        """Accept Airflow's own types (timedelta, bool backoff as older DAGs write it)."""
        backoff = 2.0 if retry_exponential_backoff is True else float(retry_exponential_backoff or 0.0)
        delay = _seconds(retry_delay)
        return cls(
            retries=int(retries or 0),
            retry_delay_s=AIRFLOW_DEFAULT_RETRY_DELAY_S if delay is None else delay,
            retry_exponential_backoff=backoff,
            max_retry_delay_s=_seconds(max_retry_delay),
            execution_timeout_s=_seconds(execution_timeout),
        )

    @classmethod
    def from_operator(cls, operator: Any) -> RetrySchedule:
        """Read the schedule off an Airflow operator (duck-typed: no Airflow import here)."""
        return cls.of(
            retries=getattr(operator, "retries", 0),
            retry_delay=getattr(operator, "retry_delay", None),
            retry_exponential_backoff=getattr(operator, "retry_exponential_backoff", 0.0),
            max_retry_delay=getattr(operator, "max_retry_delay", None),
            execution_timeout=getattr(operator, "execution_timeout", None),
        )

    def retry_delays_s(self) -> list[float]:
        """Worst-case wait before each retry (Airflow: base * m**(try-1), jitter up to x2, capped)."""
        delays = []
        backoff = self.retry_exponential_backoff
        for try_number in range(1, self.retries + 1):
            if backoff > 0 and backoff != 1.0:
                try:
                    base = max(1, math.ceil(self.retry_delay_s * backoff ** (try_number - 1)))
                    worst = min(2 * base - 1, AIRFLOW_MAX_RETRY_DELAY_S)
                except OverflowError:
                    worst = AIRFLOW_MAX_RETRY_DELAY_S
            else:
                worst = self.retry_delay_s
            if self.max_retry_delay_s:
                worst = min(worst, self.max_retry_delay_s)
            delays.append(float(worst))
        return delays

    def worst_case_s(self) -> float | None:
        """Every attempt up to its execution timeout plus every delay; ``None`` when unbounded."""
        if self.execution_timeout_s is None:
            return None
        return (self.retries + 1) * self.execution_timeout_s + sum(self.retry_delays_s())


@dataclass(frozen=True)
class PreflightCheck:
    name: str
    status: str  # ok | warn | fail
    message: str
    runbook: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PreflightReport:
    checks: list[PreflightCheck]
    capabilities: dict[str, Any] | None = None
    acls: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return all(c.status != FAIL for c in self.checks)

    @property
    def failures(self) -> list[PreflightCheck]:
        return [c for c in self.checks if c.status == FAIL]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": [c.to_dict() for c in self.checks],
            "capabilities": self.capabilities,
            "acls": self.acls,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def render(self) -> str:
        width = max((len(c.name) for c in self.checks), default=0)
        lines = [f"Preflight: {'OK' if self.ok else 'FAILED'}"]
        for check in self.checks:
            page = (
                f"  (next step: {runbook_reference(check.runbook)})"
                if check.runbook and check.status != PASS
                else ""
            )
            lines.append(f"  [{check.status.upper():4}] {check.name.ljust(width)}  {check.message}{page}")
        return "\n".join(lines)

    def raise_on_failure(self) -> None:
        """PreflightError naming every blocker and the page for the first one."""
        if self.ok:
            return
        first = self.failures[0]
        causes = "; ".join(f"{c.name}: {c.message}" for c in self.failures)
        raise PreflightError(f"preflight failed ({causes})", runbook=first.runbook)


# -- individual checks (pure) -------------------------------------------------------------


def check_transaction_timeout(transaction_timeout_ms: int, caps: ClusterCapabilities) -> PreflightCheck:
    limit, is_default = caps.effective_max_timeout_ms()
    source = "Kafka's default (the broker did not say)" if is_default else "the broker's"
    details = {
        "transaction_timeout_ms": transaction_timeout_ms,
        "transaction_max_timeout_ms": limit,
        "max_is_default": is_default,
    }
    if transaction_timeout_ms <= 0:
        return PreflightCheck(
            "transaction timeout",
            FAIL,
            f"transaction.timeout.ms must be positive, got {transaction_timeout_ms}",
            RUNBOOK_TIMEOUT,
            details,
        )
    if transaction_timeout_ms > limit:
        return PreflightCheck(
            "transaction timeout",
            FAIL,
            f"transaction.timeout.ms={transaction_timeout_ms} exceeds {source} transaction.max.timeout.ms="
            f"{limit}: InitProducerId would fail with INVALID_TRANSACTION_TIMEOUT; lower it or raise the "
            "broker limit",
            RUNBOOK_TIMEOUT,
            details,
        )
    status = WARN if is_default else PASS
    return PreflightCheck(
        "transaction timeout",
        status,
        f"transaction.timeout.ms={transaction_timeout_ms} <= transaction.max.timeout.ms={limit}"
        + (" (Kafka's default; DescribeConfigs was not allowed)" if is_default else ""),
        RUNBOOK_TIMEOUT,
        details,
    )


def check_timeout_window(
    transaction_timeout_ms: int, job_duration_budget_s: float | None, commit: RetrySchedule
) -> PreflightCheck:
    """Worst-case prepare -> commit must stay below transaction.timeout.ms (invariant 7)."""
    commit_s = commit.worst_case_s()
    details: dict[str, Any] = {
        "transaction_timeout_ms": transaction_timeout_ms,
        "job_duration_budget_s": job_duration_budget_s,
        "commit_retries": commit.retries,
        "commit_retry_delays_s": commit.retry_delays_s(),
        "commit_execution_timeout_s": commit.execution_timeout_s,
        "commit_worst_case_s": commit_s,
    }
    if job_duration_budget_s is None or commit_s is None:
        missing = (
            "the Spark job's duration budget"
            if job_duration_budget_s is None
            else ("the commit task's execution_timeout")
        )
        return PreflightCheck(
            "data-loss window",
            FAIL,
            f"cannot bound the prepare -> commit time without {missing}; set it so preflight "
            "can prove commits finish before transaction.timeout.ms",
            RUNBOOK_TIMEOUT,
            details,
        )
    worst_ms = int((job_duration_budget_s + commit_s) * 1000)
    details["worst_case_ms"] = worst_ms
    details["margin_ms"] = transaction_timeout_ms - worst_ms
    numbers = (
        f"worst case prepare -> commit = job {job_duration_budget_s:g}s + commit task {commit_s:g}s "
        f"({commit.retries + 1} attempts x {commit.execution_timeout_s:g}s + retry delays "
        f"{'+'.join(f'{d:g}' for d in commit.retry_delays_s()) or '0'}s) = {worst_ms / 1000:g}s "
        f"vs transaction.timeout.ms = {transaction_timeout_ms / 1000:g}s"
    )
    if worst_ms >= transaction_timeout_ms:
        needed = worst_ms + -(-worst_ms * SAFETY_MARGIN_PERCENT // 100)  # integer ceil: no float noise
        return PreflightCheck(
            "data-loss window",
            FAIL,
            f"{numbers}: the broker may abort prepared transactions before the last commit attempt "
            f"(data loss). Fix: raise transaction.timeout.ms to >= {needed} (within "
            "transaction.max.timeout.ms), or lower the commit task's retries/retry_delay/execution_timeout "
            "or the job budget",
            RUNBOOK_TIMEOUT,
            details,
        )
    if worst_ms * 100 >= transaction_timeout_ms * (100 - SAFETY_MARGIN_PERCENT):
        return PreflightCheck(
            "data-loss window",
            WARN,
            f"{numbers}: less than {SAFETY_MARGIN_PERCENT}% margin",
            RUNBOOK_TIMEOUT,
            details,
        )
    return PreflightCheck("data-loss window", PASS, numbers, RUNBOOK_TIMEOUT, details)


def two_phase_commit_producer_config(
    transactional_id_prefix: str, transaction_timeout_ms: int
) -> dict[str, Any]:
    """The producer settings a KIP-939 producer would use (shown in the report, not applied)."""
    return {
        "transactional.id": f"{transactional_id_prefix}<partition>-<offset>",
        "enable.idempotence": True,
        "transaction.timeout.ms": transaction_timeout_ms,
        "transaction.two.phase.commit.enable": True,
        # librdkafka cannot set Enable2Pc: 2PC writes use the Arrow producer (kafka/producers/arrow.py).
        "producer": "arrow",
    }


def check_two_phase_commit(
    caps: ClusterCapabilities,
    acls: AclCheckResult | None,
    transactional_id_prefix: str,
    transaction_timeout_ms: int,
    *,
    required: bool,
) -> list[PreflightCheck]:
    """KIP-939 readiness: advertised, enabled on the broker, ACL granted. Fails only if required."""
    bad = FAIL if required else WARN
    producer = two_phase_commit_producer_config(transactional_id_prefix, transaction_timeout_ms)
    checks = []
    if caps.two_phase_commit_advertised:
        checks.append(
            PreflightCheck("2PC advertised", PASS, "InitProducerId v6 (KIP-939) is advertised", RUNBOOK_2PC)
        )
    else:
        checks.append(
            PreflightCheck(
                "2PC advertised",
                bad if required else PASS,
                f"InitProducerId v6 is not advertised (broker serves up to v{caps.max_version(22)}); "
                "commit-by-resume is used" + (", but 2PC was required" if required else ""),
                RUNBOOK_2PC,
            )
        )
    if required or caps.two_phase_commit_advertised:
        checks.append(_two_phase_commit_broker_config(caps.two_phase_commit_enabled, bad))
    if required:
        checks.append(_two_phase_commit_acl(acls, transactional_id_prefix))
        checks.append(
            PreflightCheck(
                "2PC producer config",
                PASS if all(c.status == PASS for c in checks) else WARN,
                "producer would use " + ", ".join(f"{k}={v}" for k, v in producer.items()),
                RUNBOOK_2PC,
                {"producer_config": producer},
            )
        )
    return checks


def _two_phase_commit_broker_config(enabled: bool | None, bad: str) -> PreflightCheck:
    """transaction.two.phase.commit.enable as DescribeConfigs reported it (None: refused)."""
    if enabled is None:
        detail, status = "transaction.two.phase.commit.enable is unknown (DescribeConfigs refused)", bad
    elif not enabled:
        detail, status = "transaction.two.phase.commit.enable=false on the broker", bad
    else:
        detail, status = "transaction.two.phase.commit.enable=true", PASS
    return PreflightCheck("2PC broker config", status, detail, RUNBOOK_2PC)


def _two_phase_commit_acl(acls: AclCheckResult | None, transactional_id_prefix: str) -> PreflightCheck:
    """TWO_PHASE_COMMIT on the pipeline's TransactionalId prefix: granted, missing, or unknown."""
    status = None if acls is None else acls.status_of("TWO_PHASE_COMMIT", "TRANSACTIONAL_ID")
    on = f"TWO_PHASE_COMMIT on TransactionalId prefix {transactional_id_prefix!r}"
    if status == OK:
        return PreflightCheck("2PC ACL", PASS, f"{on} is granted", RUNBOOK_2PC)
    if status == MISSING:
        return PreflightCheck("2PC ACL", FAIL, f"{on} is missing", RUNBOOK_ACL)
    return PreflightCheck(
        "2PC ACL",
        WARN,
        "TWO_PHASE_COMMIT could not be verified (no DescribeAcls access; probing would create an id)",
        RUNBOOK_2PC,
    )


def check_acl_findings(acls: AclCheckResult) -> list[PreflightCheck]:
    checks = []
    for finding in acls.findings:
        req = finding.requirement
        if req.operation == "TWO_PHASE_COMMIT":
            continue  # judged by check_two_phase_commit with the 2PC context
        name = f"ACL {req.operation} {req.resource_type.lower()} {req.name}"
        details = {
            "method": acls.method,
            "principal": acls.principal,
            "why": req.why,
            "grant": req.kafka_acls_command(acls.principal),
        }
        if finding.status == MISSING:
            checks.append(
                PreflightCheck(
                    name,
                    FAIL,
                    f"missing ({finding.detail}; needed for {req.why}); grant: {details['grant']}",
                    RUNBOOK_ACL,
                    details,
                )
            )
        elif finding.status == OK:
            checks.append(
                PreflightCheck(name, PASS, f"{finding.detail} [{acls.method}]", RUNBOOK_ACL, details)
            )
        else:
            checks.append(PreflightCheck(name, WARN, f"unknown ({finding.detail})", RUNBOOK_ACL, details))
    return checks


# -- the whole preflight ------------------------------------------------------------------


def run_preflight(
    config: Any,
    *,
    transactional_id_prefix: str,
    topics: Iterable[str],
    transaction_timeout_ms: int,
    job_duration_budget_s: float | None,
    commit_schedule: RetrySchedule,
    two_phase_commit: bool = False,
    raise_on_failure: bool = True,
    timeout_ms: int = 10_000,
    client_factory: Callable[..., Any] = open_wire,
    record_formats: RecordFormats | None = None,
) -> PreflightReport:
    """Probe the cluster with ``config``'s principal and judge the pipeline's settings.

    ``record_formats``: the output's key/value formats, checked against their schema registry
    without registering anything (``kafka/operations/registry_preflight.py``).

    Raises ``BrokerUnreachableError`` when no broker answers, ``PreflightError`` on blockers
    (unless ``raise_on_failure=False``, then the report carries them).
    """
    topics = list(topics)
    with client_factory(config, timeout_ms=timeout_ms) as client:
        caps = ClusterCapabilities.probe_with(client)
        requirements = pipeline_requirements(
            transactional_id_prefix, topics, two_phase_commit=two_phase_commit
        )
        acls = check_acls(client, requirements, principal_of(config))
    report = build_report(
        caps,
        acls,
        transactional_id_prefix=transactional_id_prefix,
        transaction_timeout_ms=transaction_timeout_ms,
        job_duration_budget_s=job_duration_budget_s,
        commit_schedule=commit_schedule,
        two_phase_commit=two_phase_commit,
    )
    report.checks.extend(PreflightCheck(**row) for row in record_format_findings(record_formats, topics))
    if raise_on_failure:
        report.raise_on_failure()
    return report


def build_report(
    caps: ClusterCapabilities,
    acls: AclCheckResult | None,
    *,
    transactional_id_prefix: str,
    transaction_timeout_ms: int,
    job_duration_budget_s: float | None,
    commit_schedule: RetrySchedule,
    two_phase_commit: bool = False,
) -> PreflightReport:
    """The report from already-gathered facts (pure; the unit tests' entry point)."""
    checks: list[PreflightCheck] = []
    needed = [
        ("DescribeTransactions", caps.can_describe_transactions),
        ("EndTxn", caps.end_txn_version is not None),
    ]
    absent = [name for name, present in needed if not present]
    checks.append(
        PreflightCheck(
            "transaction APIs",
            FAIL if absent else PASS,
            f"the broker does not serve {', '.join(absent)}"
            if absent
            else f"DescribeTransactions and EndTxn v{caps.end_txn_version}"
            f" (transaction.version {caps.transaction_version})",
            "capabilities",
        )
    )
    if not caps.can_list_transactions:
        checks.append(
            PreflightCheck(
                "lingering detection",
                WARN,
                "ListTransactions is not served: lingering transactions can only be found by probing ids",
                "capabilities",
            )
        )
    checks.append(check_transaction_timeout(transaction_timeout_ms, caps))
    if two_phase_commit:
        # Enable2Pc transactions are never timed out by the coordinator: no prepare->commit window.
        checks.append(PreflightCheck(
            "data-loss window", PASS,
            "two-phase commit (KIP-939): prepared transactions never time out, so the commit has no deadline",
            RUNBOOK_2PC,
        ))
    else:
        checks.append(check_timeout_window(transaction_timeout_ms, job_duration_budget_s, commit_schedule))
    if acls is not None:
        checks.extend(check_acl_findings(acls))
    checks.extend(
        check_two_phase_commit(
            caps, acls, transactional_id_prefix, transaction_timeout_ms, required=two_phase_commit
        )
    )
    return PreflightReport(checks, caps.to_dict(), None if acls is None else acls.to_dict())
