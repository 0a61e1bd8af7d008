"""``kafka-eos-txn`` against the embedded broker: abort, commit, and the failure paths.

Every test opens real transactions with confluent-kafka, acts on them only through the
installed console script, and checks the result on the coordinator and with a
``read_committed`` consumer.
"""

from __future__ import annotations

import time

import pytest
from eos_cli_helpers import (
    ABORTED_STATES,
    describe,
    open_transaction,
    run_cli,
    run_cli_json,
    state_of,
    wait_for_state,
)

from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker


def keys(tag: str, n: int = 5) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


def test_abort_one_leaves_others_open_and_commit_makes_them_visible(bootstrap, unique_name, store):
    topic, prefix = unique_name("cli-topic"), unique_name("cli-txn")
    victim, keeper = f"{prefix}-0-1", f"{prefix}-1-1"
    open_transaction(bootstrap, victim, topic, keys("victim"))
    open_transaction(bootstrap, keeper, topic, keys("keeper"))

    result = run_cli(
        "abort",
        "--manifest-base",
        store,
        "--bootstrap-servers",
        bootstrap,
        "--transactional-id",
        victim,
    )
    assert result.returncode == 0, result.stderr
    assert "aborted" in result.stdout
    wait_for_state(bootstrap, victim, *ABORTED_STATES)
    kept = describe(bootstrap, keeper)
    assert str(kept.state.value) == "Ongoing"

    result = run_cli(
        "commit",
        "--bootstrap-servers",
        bootstrap,
        "--transactional-id",
        keeper,
        "--producer-id",
        kept.producer_id,
        "--epoch",
        kept.producer_epoch,
    )
    assert result.returncode == 0, result.stderr
    assert "committed" in result.stdout
    assert_exactly_once(count_keys(bootstrap, topic), keys("keeper"))


def test_commit_twice_is_idempotent(bootstrap, unique_name):
    topic, tid = unique_name("cli-topic"), unique_name("cli-txn")
    open_transaction(bootstrap, tid, topic, keys("twice"))
    d = describe(bootstrap, tid)
    args = (
        "commit",
        "--bootstrap-servers",
        bootstrap,
        "--transactional-id",
        tid,
        "--producer-id",
        d.producer_id,
        "--epoch",
        d.producer_epoch,
    )
    first = run_cli_json(*args)
    second = run_cli_json(*args)
    assert [r["outcome"] for r in first["rows"]] == ["committed"]
    assert [r["outcome"] for r in second["rows"]] == ["already_committed"]
    assert_exactly_once(count_keys(bootstrap, topic), keys("twice"))


def test_commit_after_abort_by_hand_is_refused_as_unknown_and_changes_nothing(bootstrap, unique_name, store):
    """A pair typed by hand carries no first offsets, and after a fence (Empty at E+2) the coordinator
    cannot tell a fenced transaction from a committed one whose id was initialised again: refused,
    naming what is missing (a manifest's committables carry the offsets: commit --manifest)."""
    topic, tid = unique_name("cli-topic"), unique_name("cli-txn")
    open_transaction(bootstrap, tid, topic, keys("lost"))
    d = describe(bootstrap, tid)
    assert (
        run_cli(
            "abort",
            "--manifest-base",
            store,
            "--bootstrap-servers",
            bootstrap,
            "--transactional-id",
            tid,
        ).returncode
        == 0
    )
    wait_for_state(bootstrap, tid, *ABORTED_STATES)

    result = run_cli(
        "commit",
        "--bootstrap-servers",
        bootstrap,
        "--transactional-id",
        tid,
        "--producer-id",
        d.producer_id,
        "--epoch",
        d.producer_epoch,
    )
    assert result.returncode == 1
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith(f"kafka-eos-txn: error: {tid}: ")
    assert "kafka-eos-txn runbook verdict-unknown (" in line and "no first offsets" in line
    assert state_of(describe(bootstrap, tid)) in ABORTED_STATES
    assert count_keys(bootstrap, topic) == {}


def test_wrong_producer_id_is_refused_and_the_transaction_stays_open(bootstrap, unique_name):
    topic, tid = unique_name("cli-topic"), unique_name("cli-txn")
    open_transaction(bootstrap, tid, topic, keys("fenced"))
    d = describe(bootstrap, tid)
    result = run_cli(
        "commit",
        "--bootstrap-servers",
        bootstrap,
        "--transactional-id",
        tid,
        "--producer-id",
        d.producer_id + 1000,
        "--epoch",
        d.producer_epoch,
    )
    assert result.returncode == 1  # the open transaction is another pair's: nothing tells what became of this
    assert tid in result.stderr and "kafka-eos-txn runbook verdict-unknown (" in result.stderr
    assert f"holds producer id {d.producer_id}, epoch {d.producer_epoch} (state Ongoing)" in result.stderr
    after = describe(bootstrap, tid)
    assert (str(after.state.value), after.producer_id, after.producer_epoch) == (
        "Ongoing",
        d.producer_id,
        d.producer_epoch,
    )
    # The right pid/epoch still commits it: the refusal changed nothing.
    assert (
        run_cli(
            "commit",
            "--bootstrap-servers",
            bootstrap,
            "--transactional-id",
            tid,
            "--producer-id",
            d.producer_id,
            "--epoch",
            d.producer_epoch,
        ).returncode
        == 0
    )
    assert_exactly_once(count_keys(bootstrap, topic), keys("fenced"))


def test_unknown_transactional_id_fails_and_is_not_created(bootstrap, unique_name, store):
    tid = unique_name("cli-never-used")
    for action, store_args in (("abort", ("--manifest-base", store)), ("describe", ())):
        result = run_cli(action, *store_args, "--bootstrap-servers", bootstrap, "--transactional-id", tid)
        assert result.returncode == 1, (action, result.stdout)
        assert f"{tid}: the transaction coordinator does not know this transactional id" in result.stderr
        assert "kafka-eos-txn runbook unknown-transaction (" in result.stderr
    assert describe(bootstrap, tid) is None  # abort did not create it with InitProducerId


def test_abort_after_broker_timeout_succeeds(kafka_broker_factory, unique_name, store):
    broker = kafka_broker_factory(abort_check_interval_ms=200)
    topic, tid = unique_name("cli-topic"), unique_name("cli-txn")
    open_transaction(broker.bootstrap, tid, topic, keys("expired"), timeout_ms=1000)
    wait_for_state(broker.bootstrap, tid, "CompleteAbort", timeout_s=30)
    result = run_cli_json(
        "abort",
        "--manifest-base",
        store,
        "--bootstrap-servers",
        broker.bootstrap,
        "--transactional-id",
        tid,
    )
    assert [r["outcome"] for r in result["rows"]] == ["already_aborted"]
    assert count_keys(broker.bootstrap, topic) == {}


def test_unreachable_broker_is_fast_and_clear():
    started = time.monotonic()
    result = run_cli(
        "describe",
        "--bootstrap-servers",
        "127.0.0.1:9",
        "--transactional-id",
        "x",
        "--timeout",
        "2s",
    )
    assert result.returncode == 1 and time.monotonic() - started < 20
    assert result.stderr.count("\n") == 1 and "broker-unreachable" in result.stderr
