"""A commit spread over several connections per coordinator ("lanes", ``kafka/protocol/lanes.py``).

Kafka serves one request per connection at a time, so a large commit opens extra connection
pools and splits each coordinator's EndTxn over them. These tests force lanes on a handful of
transactions (``MIN_PER_LANE`` lowered to 1: the real threshold only pays off at scale, which
``benchmarks/bench_cluster_txn.py`` measures) and check the two things lanes must not change:
each transaction is committed exactly once, and a lane that dies mid-commit ends in the
truthful "outcome is unknown: run the commit again", after which a re-run completes the batch.
Each test ends with a ``read_committed`` key count.
"""

from __future__ import annotations

import math
import threading
from collections import Counter

import kafka.errors as kerr
import pytest
from ops_support import client_config, create_topic, keys_for, open_transaction, unique

import airflow_provider_kafka_eos.kafka.protocol.lanes as lanes_module
from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.errors import KafkaEosError, UsageError
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker

TRANSACTIONS = 6
LANES = 3


@pytest.fixture
def topic(kafka_broker):
    return create_topic(kafka_broker.bootstrap, unique("lanes-topic"), partitions=2)


@pytest.fixture
def small_lanes(monkeypatch):
    """Lanes for any group size (the shipped threshold is tuned for thousands of transactions)."""
    monkeypatch.setattr(lanes_module, "MIN_PER_LANE", 1)


def _prepare(bootstrap: str, admin: TransactionAdmin, base: str, topic: str) -> list:
    return [
        open_transaction(
            bootstrap, admin, f"{base}-{i}-1", topic, keys_for(f"{base}-{i}", 3), partitions=(i % 2,)
        )
        for i in range(TRANSACTIONS)
    ]


def _per_coordinator(admin: TransactionAdmin, ids: list[str]) -> list[int]:
    """How many of ``ids`` each transaction coordinator holds (one node: all of them)."""
    return list(Counter(admin.wire.coordinators(ids).values()).values())


def _all_keys(base: str) -> list[bytes]:
    return [key for i in range(TRANSACTIONS) for key in keys_for(f"{base}-{i}", 3)]


def test_commit_over_several_lanes_commits_each_transaction_exactly_once(kafka_broker, topic, small_lanes):
    base = unique("lanes-commit")
    with TransactionAdmin(client_config(kafka_broker.bootstrap), lanes=LANES) as admin:
        batch = _prepare(kafka_broker.bootstrap, admin, base, topic)
        groups = _per_coordinator(admin, [c.transactional_id for c in batch])
        before = admin.requests_sent.get("EndTxn", 0)
        with pytest.raises(UsageError, match="lanes must be a whole number"):
            admin.commit(batch, lanes=0)  # refused before anything is sent
        assert admin.requests_sent.get("EndTxn", 0) == before

        outcomes = admin.commit(batch)

        sent = admin.requests_sent.get("EndTxn", 0) - before
        opened = admin.lanes_opened
        on_primary = admin.wire.requests.get("EndTxn", 0)
    assert sorted((o.transactional_id, o.outcome) for o in outcomes) == sorted(
        (c.transactional_id, "committed") for c in batch
    )
    assert sent == TRANSACTIONS  # one EndTxn per transaction, whichever lane carried it
    assert opened == min(LANES, max(groups))  # one lane per transaction here (MIN_PER_LANE = 1)
    # every coordinator's group was dealt round-robin over its lanes, the primary first
    assert on_primary == sum(math.ceil(size / min(LANES, size)) for size in groups)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _all_keys(base))


def test_lane_lost_mid_commit_says_outcome_unknown_and_a_rerun_commits_exactly_once(
    kafka_broker, topic, small_lanes
):
    """One extra lane loses its connections just before it sends its EndTxns, while the other
    lanes (and the broker) carry on. The fake is the one boundary we cannot cut for a single
    connection pool here, the network: that lane's bounded IO wait (``Wire._run``) raises
    kafka-python's KafkaConnectionError, as it does for a refused or reset connection; the
    Wire's resend logic, the admin's retries and every other lane's EndTxn are real."""
    base = unique("lanes-lost")
    config = client_config(kafka_broker.bootstrap)
    with TransactionAdmin(config, lanes=LANES, retry_timeout_ms=1500, connect_timeout_ms=500) as admin:
        batch = _prepare(kafka_broker.bootstrap, admin, base, topic)
        original = admin._end_txn_group
        cut = threading.Event()

        def refused(*_args):
            raise kerr.KafkaConnectionError("connection refused (the test cut this lane)")

        def cut_one_lane(group, commit, wire=None, on_answer=None):
            if wire is not None and wire is not admin.wire and not cut.is_set():
                cut.set()
                wire._run = refused  # this lane's connections die before its first request
            return original(group, commit, wire, on_answer)

        admin._end_txn_group = cut_one_lane
        with pytest.raises(KafkaEosError) as info:
            admin.commit(batch)
    assert cut.is_set()
    text = str(info.value)
    assert "outcome is unknown: run the commit again" in text, text
    assert info.value.transactional_id in {c.transactional_id for c in batch}
    committed_before = {o.transactional_id for o in getattr(info.value, "outcomes", None) or []}
    assert len(committed_before) < TRANSACTIONS

    with TransactionAdmin(config) as admin:  # the operator's "run it again"
        rerun = admin.commit(batch)
    outcomes = {o.transactional_id: o.outcome for o in rerun}
    assert set(outcomes) == {c.transactional_id for c in batch}
    assert set(outcomes.values()) <= {"committed", "already_committed"}
    assert {t for t, o in outcomes.items() if o == "already_committed"} >= committed_before
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _all_keys(base))


def test_abort_over_several_lanes_fences_each_transaction_once(kafka_broker, topic, small_lanes):
    base = unique("lanes-abort")
    with TransactionAdmin(client_config(kafka_broker.bootstrap), lanes=LANES) as admin:
        batch = _prepare(kafka_broker.bootstrap, admin, base, topic)
        ids = [c.transactional_id for c in batch]

        groups = _per_coordinator(admin, ids)

        outcomes = admin.abort(ids)

        opened = admin.lanes_opened
        after = admin.describe(ids)
    assert [(o.transactional_id, o.outcome) for o in outcomes] == [(t, "aborted") for t in ids]
    assert opened == min(LANES, max(groups))
    for c in batch:  # fenced: a higher epoch, no open transaction left
        d = after[c.transactional_id]
        assert d.state in ("Empty", "CompleteAbort") and d.producer_epoch > c.producer_epoch, d
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [])



def test_lane_lost_mid_abort_names_each_unanswered_id_and_a_rerun_aborts_the_rest(
    kafka_broker, topic, small_lanes
):
    """As above, for abort by fencing: one extra lane's connections die before its first
    request (its coordinator lookup included). The fake is again only that lane's bounded IO
    wait (``Wire._run``); the other lanes fence for real, and the lost lane's ids end in
    "run the abort again" instead of an error that drops what the other lanes did."""
    base = unique("lanes-abort-lost")
    config = client_config(kafka_broker.bootstrap)
    with TransactionAdmin(config, lanes=LANES, retry_timeout_ms=1500, connect_timeout_ms=500) as admin:
        batch = _prepare(kafka_broker.bootstrap, admin, base, topic)
        ids = [c.transactional_id for c in batch]
        wires, cut = admin._lanes.wires, []

        def refused(*_args):
            raise kerr.KafkaConnectionError("connection refused (the test cut this lane)")

        def cut_one_lane(count):
            opened = wires(count)
            if len(opened) > 1 and not cut:
                opened[1]._run = refused
                cut.append(opened[1])
            return opened

        admin._lanes.wires = cut_one_lane
        with pytest.raises(KafkaEosError) as info:
            admin.abort(ids)
    assert cut, "the batch was spread over more than one lane"
    text = str(info.value)
    assert "run the abort again" in text and info.value.transactional_id in ids, text

    with TransactionAdmin(config) as admin:  # the operator's "run it again"
        rerun = {o.transactional_id: o.outcome for o in admin.abort(ids)}
    assert set(rerun) == set(ids)
    assert set(rerun.values()) <= {"aborted", "already_aborted"}
    assert "aborted" in rerun.values(), "the lost lane's ids were still open and are aborted now"
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [])
