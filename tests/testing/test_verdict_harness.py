"""The verdict harness (kafka_eos_testing/verdict_harness.py): a short seeded run in every test run,
and its checker catching a wrong verdict (a harness that cannot fail proves nothing)."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable
from kafka_eos_testing import verdict_harness as harness
from kafka_eos_testing.transactions import produce_transaction


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
        with harness._Reader(in_process_broker.bootstrap, topic) as reader:
            harness._check(reader, [trial], report)
    assert report.wrong and report.lost == 1 and not report.clean


def test_the_checker_reading_on_across_checks_still_sees_a_key_written_twice(in_process_broker):
    """Each check reads on from the last one (a long run stays linear); the counts add up over the run,
    so a key committed once before a check and again after it is a duplicate."""
    topic = f"verdict-twice-{time.monotonic_ns()}"
    harness._create_topic(in_process_broker.bootstrap, topic)
    first = harness.Trial(0, "commit", None, "verdict-twice-0", [b"k"])
    first.committable = Committable("verdict-twice-0", 1, 0, ((topic, 0),), 1, 0, 0, 60_000, 2, 5)
    first.verdict = "committed"
    with harness._Reader(in_process_broker.bootstrap, topic) as reader:
        produce_transaction(in_process_broker.bootstrap, "verdict-twice-0", topic, [b"k"], commit=True)
        report = harness.RunReport(0, 1, Counter())
        harness._check(reader, [first], report)
        assert report.clean, report.wrong
        produce_transaction(in_process_broker.bootstrap, "verdict-twice-1", topic, [b"k"], commit=True)
        harness._check(reader, [], report)
    assert report.duplicates == 1 and not report.clean


def test_a_run_split_over_workers_counts_every_trial_once_each_worker_with_its_own_seed():
    report = harness._in_workers(7, 5, 2)  # 4 + 3 trials, seeds 5000 and 5001, a broker each
    assert report.clean, report.wrong
    assert sum(report.verdicts.values()) == sum(report.faults.values()) == 7
    assert (harness.worker_seed(5, 0), harness.worker_seed(5, 1)) == (5000, 5001)
