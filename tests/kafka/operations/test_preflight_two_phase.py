"""Preflight with two_phase_commit=True: the data-loss window does not apply (Enable2Pc
transactions never time out), while without 2PC the same numbers fail it."""

from __future__ import annotations

from airflow_provider_kafka_eos.kafka.operations.preflight import (
    FAIL,
    PASS,
    RetrySchedule,
    build_report,
    two_phase_commit_producer_config,
)
from tests.kafka.operations.test_preflight import caps


def _report(two_phase_commit: bool):
    # job 10 min + commit worst case 25 min: far beyond a 60 s transaction timeout.
    return build_report(
        caps(init_pid_max=6, configs={"transaction.max.timeout.ms": "900000",
                                      "transaction.two.phase.commit.enable": "true"}),
        None,
        transactional_id_prefix="p-",
        transaction_timeout_ms=60_000,
        job_duration_budget_s=600,
        commit_schedule=RetrySchedule.of(retries=2, retry_delay=300, execution_timeout=300),
        two_phase_commit=two_phase_commit,
    )


def test_window_is_waived_only_under_two_phase_commit():
    window = {False: None, True: None}
    for two_phase in window:
        window[two_phase] = next(c for c in _report(two_phase).checks if c.name == "data-loss window")
    assert window[False].status == FAIL
    assert window[True].status == PASS and "never time out" in window[True].message
    assert window[True].runbook == "two-phase-commit"


def test_producer_config_names_the_arrow_producer():
    assert two_phase_commit_producer_config("p-", 60_000)["producer"] == "arrow"
