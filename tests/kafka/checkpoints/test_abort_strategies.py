"""Abort strategies (LISTING, PROBING) obey the precommitted-range and ownership rules; the LSO
probe names the transaction that holds read_committed consumers back."""

from __future__ import annotations

import pytest
from ops_support import client_config, create_topic, keys_for, open_transaction, unique

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.abort_strategies import abort_by_listing, abort_by_probing
from airflow_provider_kafka_eos.kafka.checkpoints.store import PreparedRef
from airflow_provider_kafka_eos.kafka.protocol.committable import TopicPartition
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def admin(kafka_broker):
    with TransactionAdmin(client_config(kafka_broker.bootstrap)) as txn_admin:
        yield txn_admin


def _prepared(*committables) -> dict[str, PreparedRef]:
    """A PREPARED index listing these committables (as ``checkpoint.prepared_index`` builds it)."""
    return {
        c.transactional_id: PreparedRef(
            "file:///m/p/checkpoint-1.json", "p", 1, c.producer_id, c.producer_epoch
        )
        for c in committables
    }


def _state(admin, tid):
    d = admin.describe([tid])[tid]
    return d.state, d.producer_epoch


def test_listing_aborts_owned_orphans_only(kafka_broker, admin):
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap, unique("listing-topic"))
    prefix = unique("lst")
    ids = {
        "precommitted": f"{prefix}-0-1",
        "orphan": f"{prefix}-1-1",
        "lookalike": f"{prefix}2-0-1",  # starts with the prefix, but another pipeline's id
        "foreign": f"{unique('other')}-0-1",
    }
    prepared = {
        name: open_transaction(bootstrap, admin, tid, topic, keys_for(tid, 2)) for name, tid in ids.items()
    }
    untouched = {name: _state(admin, ids[name]) for name in ("precommitted", "lookalike", "foreign")}

    dry = abort_by_listing(admin, [prefix], prepared=_prepared(prepared["precommitted"]), dry_run=True)
    assert dry.aborted == [ids["orphan"]]
    assert _state(admin, ids["orphan"])[0] == "Ongoing"  # dry run changed nothing

    report = abort_by_listing(admin, [prefix], prepared=_prepared(prepared["precommitted"]))

    assert report.aborted == [ids["orphan"]]
    skipped = {d.transactional_id: d.reason for d in report.skipped}
    assert set(skipped) == {ids["precommitted"], ids["lookalike"]}
    assert "PREPARED manifest" in skipped[ids["precommitted"]]
    assert "outside the configured prefixes" in skipped[ids["lookalike"]]
    for name, state in untouched.items():
        assert _state(admin, ids[name]) == state, name
    admin.commit([prepared["precommitted"]])
    assert_exactly_once(count_keys(bootstrap, topic), keys_for(ids["precommitted"], 2))
    admin.abort([ids["lookalike"], ids["foreign"]])  # leave nothing open on the session broker


def test_probing_fences_upward_until_an_unused_id_and_skips_precommitted(kafka_broker, admin):
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap, unique("probing-topic"))
    prefix = unique("prb")
    p0c5 = open_transaction(bootstrap, admin, f"{prefix}-0-5", topic, keys_for("p0c5", 2))
    open_transaction(bootstrap, admin, f"{prefix}-0-6", topic, keys_for("p0c6", 2))
    protected = open_transaction(bootstrap, admin, f"{prefix}-0-7", topic, keys_for("p0c7", 2))
    committed = open_transaction(bootstrap, admin, f"{prefix}-1-5", topic, keys_for("p1c5", 2))
    admin.commit([committed])
    protected_state = _state(admin, protected.transactional_id)

    report = abort_by_probing(admin, prefix, [0, 1], 5, prepared=_prepared(protected))

    assert [(d.transactional_id, d.action) for d in report.decisions] == [
        (f"{prefix}-0-5", "aborted"),
        (f"{prefix}-0-6", "aborted"),
        (f"{prefix}-0-7", "skipped"),
        (f"{prefix}-0-8", "unused"),
        (f"{prefix}-1-5", "already_complete"),
        (f"{prefix}-1-6", "unused"),
    ]
    assert _state(admin, protected.transactional_id) == protected_state
    assert _state(admin, p0c5.transactional_id)[0] != "Ongoing"
    admin.commit([protected])
    assert_exactly_once(count_keys(bootstrap, topic), keys_for("p1c5", 2) + keys_for("p0c7", 2))


def test_lso_probe_names_the_lingering_transaction_and_clears_after_abort(kafka_broker, admin):
    bootstrap = kafka_broker.bootstrap
    topic = create_topic(bootstrap, unique("lso-topic"))
    base = unique("lso")
    first = open_transaction(bootstrap, admin, f"{base}-0-1", topic, keys_for("first", 3))
    admin.commit([first])
    lingering = open_transaction(bootstrap, admin, f"{base}-0-2", topic, keys_for("stuck", 2))
    after = open_transaction(bootstrap, admin, f"{base}-0-3", topic, keys_for("after", 4))
    admin.commit([after])

    [status] = admin.lso_probe([TopicPartition(topic, 0)])

    assert status.stalled and status.last_stable_offset < status.high_watermark
    blocking = status.blocking
    assert blocking is not None
    assert (blocking.transactional_id, blocking.producer_id, blocking.producer_epoch) == (
        lingering.transactional_id,
        lingering.producer_id,
        lingering.producer_epoch,
    )
    assert blocking.txn_start_offset == status.last_stable_offset
    assert_exactly_once(count_keys(bootstrap, topic), keys_for("first", 3))  # "after" is held back

    admin.abort([lingering.transactional_id])

    [cleared] = admin.lso_probe([(topic, 0)])
    assert not cleared.stalled and cleared.open_transactions == ()
    assert_exactly_once(count_keys(bootstrap, topic), keys_for("first", 3) + keys_for("after", 4))
