"""ClusterCapabilities.probe and the preflight's cluster checks against embedded brokers with
different settings (TV1/TV2, 2PC on/off, a low transaction.max.timeout.ms)."""

from __future__ import annotations

import pytest

from airflow_provider_kafka_eos.kafka.admin.capabilities import ClusterCapabilities
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import BrokerUnreachableError, PreflightError
from airflow_provider_kafka_eos.kafka.operations.preflight import RetrySchedule, run_preflight

pytestmark = pytest.mark.broker

QUICK_COMMIT = RetrySchedule.of(retries=1, retry_delay=10, execution_timeout=30)


def config(bootstrap: str) -> KafkaClientConfig:
    return KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap})


def test_probe_reads_versions_features_and_broker_configs(kafka_broker_factory, kafka_broker_pool):
    tv2 = ClusterCapabilities.probe(config(kafka_broker_pool(transaction_max_timeout_ms=60_000).bootstrap))
    assert tv2.can_list_transactions and tv2.can_describe_transactions and tv2.can_describe_producers
    assert tv2.transaction_version == 2 and tv2.end_txn_version == 5
    assert tv2.transaction_max_timeout_ms == 60_000
    assert tv2.two_phase_commit_enabled is False and not tv2.two_phase_commit_advertised
    assert "60000 ms (1 min)" in tv2.render()

    tv1 = ClusterCapabilities.probe(config(kafka_broker_factory(transaction_version=1).bootstrap))
    assert tv1.transaction_version == 1 and not tv1.tv2 and tv1.end_txn_version == 4


def test_2pc_broker_is_detected_and_passes_a_2pc_preflight(kafka_broker_factory, unique_name):
    broker = kafka_broker_factory(two_phase_commit=True)
    caps = ClusterCapabilities.probe(config(broker.bootstrap))
    assert caps.two_phase_commit_advertised and caps.two_phase_commit_enabled is True
    report = run_preflight(
        config(broker.bootstrap),
        transactional_id_prefix=unique_name("pf") + "-",
        topics=[unique_name("pf-topic")],
        transaction_timeout_ms=300_000,
        job_duration_budget_s=60,
        commit_schedule=QUICK_COMMIT,
        two_phase_commit=True,
    )
    statuses = {c.name: c.status for c in report.checks}
    assert statuses["2PC advertised"] == statuses["2PC broker config"] == statuses["2PC ACL"] == "ok"
    assert report.acls["method"] == "no-authorizer"


def test_2pc_required_on_a_broker_without_it_is_a_blocker(kafka_broker, unique_name):
    with pytest.raises(PreflightError) as err:
        run_preflight(
            config(kafka_broker.bootstrap),
            transactional_id_prefix=unique_name("pf") + "-",
            topics=[unique_name("pf-topic")],
            transaction_timeout_ms=300_000,
            job_duration_budget_s=60,
            commit_schedule=QUICK_COMMIT,
            two_phase_commit=True,
        )
    assert "2PC advertised: InitProducerId v6 is not advertised" in str(err.value)
    assert "kafka-eos-txn runbook two-phase-commit (" in str(err.value)


def test_timeout_above_broker_max_and_window_fail_with_numbers(kafka_broker_pool, unique_name):
    broker = kafka_broker_pool(transaction_max_timeout_ms=60_000)  # the probe test's broker
    report = run_preflight(
        config(broker.bootstrap),
        transactional_id_prefix=unique_name("pf") + "-",
        topics=[unique_name("pf-topic")],
        transaction_timeout_ms=120_000,
        job_duration_budget_s=100,
        commit_schedule=QUICK_COMMIT,
        raise_on_failure=False,
    )
    failed = {c.name: c.message for c in report.failures}
    assert set(failed) == {"transaction timeout", "data-loss window"}
    assert (
        "transaction.timeout.ms=120000 exceeds the broker's transaction.max.timeout.ms=60000"
        in (failed["transaction timeout"])
    )
    # 100 s job + (2 attempts x 30 s + 10 s delay) = 170 s > 120 s.
    assert "= 170s vs transaction.timeout.ms = 120s" in failed["data-loss window"]
    assert "raise transaction.timeout.ms to >= 187000" in failed["data-loss window"]


def test_unreachable_cluster_raises_broker_unreachable():
    with pytest.raises(BrokerUnreachableError) as err:
        ClusterCapabilities.probe(config("127.0.0.1:9"), timeout_ms=1500)
    assert "127.0.0.1:9" in str(err.value)
    assert "kafka-eos-txn runbook broker-unreachable (" in str(err.value)
