"""Commit-by-resume and abort-by-fencing against a broker (the seed tool's test plan).

Every data-path test ends with a ``read_committed`` consumer counting keys. Runs against the
embedded broker, or a real Kafka when ``KAFKA_BOOTSTRAP_SERVERS`` is set.
"""

from __future__ import annotations

import dataclasses
import time

import pytest
from ops_support import client_config, create_topic, keys_for, open_transaction, unique, wait_for_state

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.errors import (
    BrokerUnreachableError,
    DataLossError,
    UnknownTransactionError,
    VerdictUnknownError,
)
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def admin(kafka_broker):
    with TransactionAdmin(client_config(kafka_broker.bootstrap)) as txn_admin:
        yield txn_admin


@pytest.fixture
def topic(kafka_broker):
    return create_topic(kafka_broker.bootstrap, unique("ops-topic"), partitions=2)


def test_commit_with_right_producer_id_and_epoch_makes_records_visible(kafka_broker, admin, topic):
    tid = unique("ops-commit") + "-0-1"
    keys = keys_for(tid, 20)
    committable = open_transaction(kafka_broker.bootstrap, admin, tid, topic, keys, partitions=(0, 1))
    assert count_keys(kafka_broker.bootstrap, topic) == {}  # prepared, not visible yet

    outcomes = admin.commit([committable])

    assert [(o.transactional_id, o.outcome) for o in outcomes] == [(tid, "committed")]
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), keys)


def test_commit_after_commit_is_idempotent(kafka_broker, admin, topic):
    tid = unique("ops-twice") + "-0-1"
    keys = keys_for(tid, 5)
    committable = open_transaction(kafka_broker.bootstrap, admin, tid, topic, keys)
    admin.commit([committable])
    sent_before = admin.requests_sent.get("EndTxn", 0)

    again = admin.commit([committable])

    assert [o.outcome for o in again] == ["already_committed"]
    assert admin.requests_sent.get("EndTxn", 0) == sent_before  # nothing sent: it is complete
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), keys)


def test_abort_one_transaction_leaves_the_others_untouched(kafka_broker, admin, topic):
    base = unique("ops-abort-one")
    prepared = {
        i: open_transaction(
            kafka_broker.bootstrap, admin, f"{base}-{i}-1", topic, keys_for(f"{base}-{i}-1", 4)
        )
        for i in range(3)
    }
    victim = prepared[1].transactional_id

    outcomes = admin.abort([victim])

    assert [(o.transactional_id, o.outcome) for o in outcomes] == [(victim, "aborted")]
    for i in (0, 2):
        d = admin.describe([prepared[i].transactional_id])[prepared[i].transactional_id]
        assert (d.state, d.producer_id, d.producer_epoch) == (
            "Ongoing",
            prepared[i].producer_id,
            prepared[i].producer_epoch,
        )
    assert count_keys(kafka_broker.bootstrap, topic) == {}
    admin.commit([prepared[0], prepared[2]])
    expected = keys_for(prepared[0].transactional_id, 4) + keys_for(prepared[2].transactional_id, 4)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)  # nothing of the aborted one


def test_abort_is_idempotent_and_reports_completed_transactions(kafka_broker, admin, topic):
    base = unique("ops-abort-again")
    committed = open_transaction(kafka_broker.bootstrap, admin, f"{base}-0-1", topic, keys_for(base, 2))
    aborted = open_transaction(kafka_broker.bootstrap, admin, f"{base}-1-1", topic, keys_for(base + "x", 2))
    admin.commit([committed])
    admin.abort([aborted.transactional_id])
    epoch_after_abort = admin.describe([aborted.transactional_id])[aborted.transactional_id].producer_epoch

    outcomes = admin.abort([committed.transactional_id, aborted.transactional_id])

    assert [o.outcome for o in outcomes] == ["already_committed", "already_aborted"]
    after = admin.describe([aborted.transactional_id])[aborted.transactional_id]
    assert after.producer_epoch == epoch_after_abort  # no second fence
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), keys_for(base, 2))


def test_commit_after_abort_is_data_loss_and_changes_nothing(kafka_broker, admin, topic):
    tid = unique("ops-lost") + "-0-1"
    committable = open_transaction(kafka_broker.bootstrap, admin, tid, topic, keys_for(tid, 3))
    admin.abort([tid])
    before = admin.describe([tid])[tid]

    with pytest.raises(DataLossError) as info:
        admin.commit([committable])

    assert info.value.transactional_id == tid
    assert str(info.value).startswith(f"{tid}: ") and "kafka-eos-txn runbook data-loss (" in str(info.value)
    assert admin.describe([tid])[tid] == before
    assert count_keys(kafka_broker.bootstrap, topic) == {}


@pytest.mark.parametrize("wrong", ["producer_id", "producer_epoch"])
def test_wrong_producer_id_or_epoch_is_refused_as_unknown(kafka_broker, admin, topic, wrong):
    """The open transaction is another pair's: nothing tells what became of the recorded one."""
    tid = unique("ops-wrong") + "-0-1"
    keys = keys_for(tid, 3)
    committable = open_transaction(kafka_broker.bootstrap, admin, tid, topic, keys)
    bad = dataclasses.replace(committable, **{wrong: getattr(committable, wrong) + 7})
    before = admin.describe([tid])[tid]

    with pytest.raises(VerdictUnknownError, match=r"(?s)holds producer id .*Ongoing.*verdict-unknown\.md"):
        admin.commit([bad])

    assert admin.describe([tid])[tid] == before
    assert count_keys(kafka_broker.bootstrap, topic) == {}
    admin.commit([committable])  # the right pair still commits
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), keys)


def test_batch_with_one_aborted_transaction_commits_none(kafka_broker, admin, topic):
    base = unique("ops-batch")
    batch = [
        open_transaction(kafka_broker.bootstrap, admin, f"{base}-{i}-1", topic, keys_for(f"{base}-{i}", 3))
        for i in range(4)
    ]
    admin.abort([batch[2].transactional_id])
    sent_before = admin.requests_sent.get("EndTxn", 0)

    with pytest.raises(DataLossError) as info:
        admin.commit(batch)

    assert info.value.transactional_id == batch[2].transactional_id
    assert admin.requests_sent.get("EndTxn", 0) == sent_before  # not a single EndTxn was sent
    for c in (batch[0], batch[1], batch[3]):
        assert admin.describe([c.transactional_id])[c.transactional_id].state == "Ongoing"
    assert count_keys(kafka_broker.bootstrap, topic) == {}


def test_abort_of_unknown_id_creates_nothing_and_aborts_nothing(kafka_broker, admin, topic):
    tid = unique("ops-never-used") + "-0-1"
    known = open_transaction(kafka_broker.bootstrap, admin, unique("ops-known") + "-0-1", topic, [b"k"])
    with pytest.raises(UnknownTransactionError, match=r"unknown-transaction\.md") as info:
        admin.abort([known.transactional_id, tid])
    assert info.value.transactional_id == tid
    with pytest.raises(UnknownTransactionError):
        admin.describe([tid])  # still unknown: no InitProducerId was sent
    assert admin.describe([tid], missing_ok=True) == {}
    still = admin.describe([known.transactional_id])[known.transactional_id]
    assert (still.state, still.producer_epoch) == (
        "Ongoing",
        known.producer_epoch,
    )  # the batch was refused whole
    admin.abort([known.transactional_id])


def test_abort_in_place_with_known_producer_id_and_epoch(kafka_broker, admin, topic):
    tid = unique("ops-in-place") + "-0-1"
    committable = open_transaction(kafka_broker.bootstrap, admin, tid, topic, keys_for(tid, 3))

    outcome = admin.abort_in_place(committable)

    assert outcome.outcome == "aborted"
    wait_for_state(admin, tid, {"CompleteAbort"})
    assert admin.abort_in_place(committable).outcome == "already_aborted"
    assert count_keys(kafka_broker.bootstrap, topic) == {}


def test_list_and_find_lingering_filter_by_prefix_state_and_age(kafka_broker, admin, topic):
    base = unique("ops-list")
    other = unique("ops-other")
    mine = open_transaction(kafka_broker.bootstrap, admin, f"{base}-0-1", topic, keys_for(base, 1))
    done = open_transaction(kafka_broker.bootstrap, admin, f"{base}-1-1", topic, keys_for(base + "d", 1))
    open_transaction(kafka_broker.bootstrap, admin, f"{other}-0-1", topic, keys_for(other, 1))
    admin.commit([done])
    # Kafka answers EndTxn before it writes the markers: settle, as any client must
    wait_for_state(admin, done.transactional_id, {"CompleteCommit"})

    listed = admin.list(prefixes=[base])
    assert {(entry.transactional_id, entry.state) for entry in listed} == {
        (mine.transactional_id, "Ongoing"),
        (done.transactional_id, "CompleteCommit"),
    }
    assert [e.transactional_id for e in admin.list(prefixes=[base], states=["Ongoing"])] == [
        mine.transactional_id
    ]
    lingering = admin.find_lingering(prefixes=[base], min_age_ms=0)
    assert [d.transactional_id for d in lingering] == [mine.transactional_id]
    assert admin.find_lingering(prefixes=[base], min_age_ms=3_600_000) == []
    assert admin.list(prefixes=[base], min_age_ms=3_600_000) == []
    assert {e.transactional_id for e in admin.list(prefixes=[base], min_age_ms=0)} == {
        mine.transactional_id,
        done.transactional_id,
    }
    # cleanup so the session's broker holds no open transaction of this test
    admin.abort([mine.transactional_id, f"{other}-0-1"])


def test_unreachable_broker_fails_fast_with_a_clear_error():
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig

    started = time.monotonic()
    with pytest.raises(BrokerUnreachableError) as info:
        TransactionAdmin(
            KafkaClientConfig.from_mapping({"bootstrap.servers": "127.0.0.1:1"}), connect_timeout_ms=2000
        )
    elapsed = time.monotonic() - started
    assert elapsed < 10, f"took {elapsed:.1f} s"
    text = str(info.value)
    assert "127.0.0.1:1" in text and "broker-unreachable.md" in text and "Traceback" not in text


class _StaleDescribe(TransactionAdmin):
    """Serves the first DescribeTransactions answer from a snapshot taken earlier.

    The race this reproduces (the broker aborts one transaction after our verification read
    it as Ongoing, before our EndTxn reaches it) cannot be timed reliably against a live
    broker; replaying a stale describe is the one boundary we fake, the EndTxn answers are real.
    """

    snapshot: dict | None = None

    def describe(self, ids, *, missing_ok=False):
        if self.snapshot is not None:
            stale, self.snapshot = self.snapshot, None
            return {t: stale[t] for t in ids}
        return super().describe(ids, missing_ok=missing_ok)


def test_loss_discovered_at_end_txn_is_loud_and_names_what_did_commit(kafka_broker, topic):
    base = unique("ops-race")
    with _StaleDescribe(client_config(kafka_broker.bootstrap)) as admin:
        batch = [
            open_transaction(
                kafka_broker.bootstrap, admin, f"{base}-{i}-1", topic, keys_for(f"{base}-{i}", 2)
            )
            for i in range(3)
        ]
        before_abort = admin.describe([c.transactional_id for c in batch])
        admin.abort([batch[1].transactional_id])  # the "broker" aborts it after our verification read
        admin.snapshot = before_abort

        with pytest.raises(DataLossError) as info:
            admin.commit(batch)

    err = info.value
    assert err.transactional_id == batch[1].transactional_id
    assert "only partly visible" in str(err)
    assert sorted((o.transactional_id, o.outcome) for o in err.outcomes) == [
        (batch[0].transactional_id, "committed"),
        (batch[2].transactional_id, "committed"),
    ]
    assert_exactly_once(
        count_keys(kafka_broker.bootstrap, topic), keys_for(f"{base}-0", 2) + keys_for(f"{base}-2", 2)
    )
