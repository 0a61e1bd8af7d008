"""Preflight judgement from gathered facts: the timeout window with numbers, limits, 2PC, ACLs."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from kafka.protocol.metadata import ApiVersionsResponse

from airflow_provider_kafka_eos.kafka.admin.acl_check import AclCheckResult, AclFinding, pipeline_requirements
from airflow_provider_kafka_eos.kafka.admin.capabilities import ClusterCapabilities
from airflow_provider_kafka_eos.kafka.errors import PreflightError
from airflow_provider_kafka_eos.kafka.operations.preflight import (
    RetrySchedule,
    build_report,
    check_timeout_window,
)


def caps(init_pid_max=5, configs=None, tv=2):
    spans = {22: (0, init_pid_max), 26: (0, 5), 61: (0, 0), 65: (0, 0), 66: (0, 1)}
    response = ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=a, max_version=b)
            for k, (a, b) in spans.items()
        ],
        finalized_features=[
            ApiVersionsResponse.FinalizedFeatureKey(
                name="transaction.version", max_version_level=tv, min_version_level=0
            )
        ],
    )
    base = ClusterCapabilities.from_responses(response, broker_id=1)
    return ClusterCapabilities(base.api_versions, base.finalized_features, configs or {}, 1)


def test_retry_delays_follow_airflow_backoff_worst_case():
    constant = RetrySchedule.of(
        retries=3, retry_delay=timedelta(minutes=1), execution_timeout=timedelta(minutes=2)
    )
    assert constant.retry_delays_s() == [60.0, 60.0, 60.0]
    assert constant.worst_case_s() == 4 * 120 + 180
    # multiplier 2: bases 60, 120, 240; Airflow's jitter can reach 2*base - 1.
    backoff = RetrySchedule.of(
        retries=3, retry_delay=60, retry_exponential_backoff=2.0, execution_timeout=120
    )
    assert backoff.retry_delays_s() == [119.0, 239.0, 479.0]
    capped = RetrySchedule.of(
        retries=3, retry_delay=60, retry_exponential_backoff=2.0, max_retry_delay=200, execution_timeout=120
    )
    assert capped.retry_delays_s() == [119.0, 200.0, 200.0]
    assert RetrySchedule.of(retries=2).worst_case_s() is None  # no execution_timeout: unbounded


def test_window_fails_with_the_numbers_and_the_fix():
    # job 10 min + commit (3 attempts x 5 min + 2 x 5 min delay) = 35 min > 15 min timeout.
    schedule = RetrySchedule.of(retries=2, retry_delay=300, execution_timeout=300)
    check = check_timeout_window(900_000, 600, schedule)
    assert check.status == "fail"
    assert "job 600s + commit task 1500s" in check.message
    assert "= 2100s vs transaction.timeout.ms = 900s" in check.message
    assert "raise transaction.timeout.ms to >= 2310000" in check.message
    assert check.runbook == "transaction-timeout-risk"
    assert check.details["worst_case_ms"] == 2_100_000 and check.details["margin_ms"] == -1_200_000


def test_window_passes_and_warns_near_the_edge():
    schedule = RetrySchedule.of(retries=1, retry_delay=60, execution_timeout=60)
    assert check_timeout_window(3_600_000, 600, schedule).status == "ok"  # 780 s of 3600 s
    assert check_timeout_window(800_000, 600, schedule).status == "warn"  # 780 s of 800 s
    assert check_timeout_window(780_000, 600, schedule).status == "fail"  # equal is too late


def test_missing_budget_is_a_blocker_not_a_guess():
    check = check_timeout_window(900_000, None, RetrySchedule.of(execution_timeout=60))
    assert check.status == "fail" and "duration budget" in check.message


def _report(**overrides):
    kwargs = dict(
        transactional_id_prefix="p-",
        transaction_timeout_ms=600_000,
        job_duration_budget_s=60,
        commit_schedule=RetrySchedule.of(retries=1, retry_delay=30, execution_timeout=60),
    )
    kwargs.update(overrides)
    acls = kwargs.pop("acls", None)
    return build_report(
        kwargs.pop("caps", caps(configs={"transaction.max.timeout.ms": "900000"})), acls, **kwargs
    )


def test_timeout_above_broker_max_blocks_and_raises():
    report = _report(transaction_timeout_ms=1_000_000)
    assert not report.ok
    with pytest.raises(PreflightError) as err:
        report.raise_on_failure()
    assert "exceeds the broker's transaction.max.timeout.ms=900000" in str(err.value)
    assert "kafka-eos-txn runbook transaction-timeout-risk (" in str(err.value)


def test_good_report_renders_and_is_json():
    report = _report()
    assert report.ok, report.render()
    report.raise_on_failure()
    data = json.loads(report.to_json())
    assert data["ok"] is True and data["capabilities"]["end_txn_version"] == 5
    assert "[OK  ] data-loss window" in report.render()


def test_missing_acl_fails_and_names_the_grant():
    reqs = pipeline_requirements("p-", ["out"])
    findings = [
        AclFinding(r, "missing" if r.resource_type == "TOPIC" and r.operation == "WRITE" else "ok")
        for r in reqs
    ]
    report = _report(acls=AclCheckResult("describe-acls", "User:etl", findings))
    failed = report.failures
    assert [c.name for c in failed] == ["ACL WRITE topic out"]
    assert "kafka-acls.sh" in failed[0].message and "--allow-principal User:etl" in failed[0].message
    assert failed[0].runbook == "missing-acl"


def test_2pc_required_fails_when_not_advertised_or_disabled_and_shows_producer_config():
    not_advertised = _report(two_phase_commit=True)
    names = {c.name: c.status for c in not_advertised.checks}
    assert names["2PC advertised"] == "fail" and names["2PC broker config"] == "fail"
    assert (
        "transaction.two.phase.commit.enable=True"
        in next(c for c in not_advertised.checks if c.name == "2PC producer config").message
    )

    reqs = pipeline_requirements("p-", [], two_phase_commit=True)
    granted = AclCheckResult("describe-acls", "User:etl", [AclFinding(r, "ok") for r in reqs])
    ready = _report(
        two_phase_commit=True,
        acls=granted,
        caps=caps(
            init_pid_max=6,
            configs={"transaction.max.timeout.ms": "900000", "transaction.two.phase.commit.enable": "true"},
        ),
    )
    assert ready.ok, ready.render()
    assert {c.name for c in ready.checks} >= {"2PC advertised", "2PC broker config", "2PC ACL"}


def test_2pc_not_required_never_blocks():
    report = _report(two_phase_commit=False)
    assert report.ok
    assert next(c for c in report.checks if c.name == "2PC advertised").status == "ok"
