"""The verdict harness (kafka_eos_testing/verdict_harness.py): a short seeded run in every test run,
and its checker catching a wrong verdict (a harness that cannot fail proves nothing)."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from kafka_eos_testing import verdict_harness as harness


@pytest.fixture(scope="module")
def in_process_broker():
    broker = harness.InProcessBroker(default_partitions=harness.PARTITIONS)
    try:
        yield broker
    finally:
        broker.stop()


def test_a_short_seeded_run_has_no_wrong_verdict_and_no_duplicate(in_process_broker):
    seed = int(time.strftime("%Y%m%d"))
    report = harness.run_trials(in_process_broker.bootstrap, 60, seed, set_epoch=in_process_broker.set_epoch,
                                time_out=in_process_broker.time_out, batch=30)
    assert report.clean, f"{report.summary()} (replay: python -m kafka_eos_testing.verdict_harness " \
                         f"--trials 60 --seed {seed})\n" + "\n".join(report.wrong[:5])
    assert len(report.faults) >= 7 and report.rotated > 0, report.summary()


def test_the_checker_catches_a_verdict_the_data_contradicts(in_process_broker):
    topic = f"verdict-check-{time.monotonic_ns()}"
    harness._create_topic(in_process_broker.bootstrap, topic)
    with TransactionAdmin(KafkaClientConfig({"bootstrap.servers": in_process_broker.bootstrap})) as admin:
        trial = harness.Trial(0, "commit", None, "verdict-checker-0", [b"never-written"])
        trial.committable = harness._prepare(admin, in_process_broker.bootstrap, topic, "verdict-checker-0",
                                             [b"written"], [0])
        admin.abort(["verdict-checker-0"])
        trial.verdict = "committed"  # what a broken verdict would say about an aborted transaction
        report = harness.RunReport(0, 1, Counter())
        harness._check(admin, in_process_broker.bootstrap, topic, [trial], report)
    assert report.wrong and report.lost == 1 and not report.clean
