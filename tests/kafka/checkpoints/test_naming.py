"""Naming strategies and the precommitted-range rule (pure logic)."""

from __future__ import annotations

import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import Manifest, ManifestStatus
from airflow_provider_kafka_eos.kafka.checkpoints.naming import (
    NamingStrategy,
    ParsedTransactionalId,
    check_strategy_switch,
    incrementing_id,
    owned_by,
    parse_transactional_id,
    pooling_id,
    pooling_ids,
)
from airflow_provider_kafka_eos.kafka.checkpoints.store import prepared_index
from airflow_provider_kafka_eos.kafka.errors import (
    ConfigError,
    UsageError,
)
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, TopicPartition

# -- naming ---------------------------------------------------------------------------------------


def test_incrementing_id_and_parse_back_with_dashes_in_prefix():
    tid = incrementing_id("etl-orders-v2", 3, 17)
    assert tid == "etl-orders-v2-3-17"
    assert parse_transactional_id(tid) == ParsedTransactionalId("etl-orders-v2", 3, 17)


@pytest.mark.parametrize("tid", ["orders", "orders-1", "orders-x-1", "orders-1-y", "-1-2", "orders-1--2"])
def test_foreign_shapes_do_not_parse(tid):
    assert parse_transactional_id(tid) is None


def test_owned_by_is_exact_prefix_not_startswith():
    assert owned_by("p", "p-0-1")
    assert not owned_by("p", "p2-0-1")
    assert not owned_by("p", "p-x-0-1") and owned_by("p-x", "p-x-0-1")
    assert not owned_by("p", "p-0")


def test_pooling_takes_smallest_free_slot_per_partition():
    in_use = {"p-0-0", "p-0-1", "p-0-3", "p-1-0", "q-0-2", "p2-0-2"}
    assert pooling_id("p", 0, in_use) == "p-0-2"
    assert pooling_id("p", 1, in_use) == "p-1-1"
    assert pooling_id("p", 2, in_use) == "p-2-0"
    assert pooling_ids("p", [0, 1], iter(in_use)) == {0: "p-0-2", 1: "p-1-1"}


@pytest.mark.parametrize("prefix", ["", " ", " p", "p "])
def test_bad_prefixes_are_refused(prefix):
    with pytest.raises(UsageError):  # kafka/validation.py's one rule, as at the submit operator
        incrementing_id(prefix, 0, 0)


def test_a_prefix_ending_in_a_dash_names_and_parses_back():
    """``orders-`` is a prefix like any other: its ids read back from their last two dashes."""
    tid = incrementing_id("orders-", 3, 7)
    assert tid == "orders--3-7"
    assert parse_transactional_id(tid) == ParsedTransactionalId("orders-", 3, 7)
    assert owned_by("orders-", tid) and not owned_by("orders", tid)


def test_switch_pooling_to_incrementing_with_state_is_refused():
    with pytest.raises(ConfigError, match="POOLING"):
        check_strategy_switch("POOLING", "INCREMENTING", has_state=True)
    assert check_strategy_switch("POOLING", "INCREMENTING", has_state=False) is NamingStrategy.INCREMENTING
    assert check_strategy_switch("INCREMENTING", "POOLING", has_state=True) is NamingStrategy.POOLING
    assert check_strategy_switch(None, "pooling", has_state=True) is NamingStrategy.POOLING
    with pytest.raises(ConfigError, match="RANDOM"):
        check_strategy_switch(None, "RANDOM", has_state=False)


# -- precommitted range ----------------------------------------------------------------------------


def _committable(tid: str, **over) -> Committable:
    fields = dict(
        transactional_id=tid,
        producer_id=10,
        producer_epoch=4,
        partitions=(TopicPartition("t", 0),),
        record_count=5,
        prepared_at_ms=1_000,
        transaction_start_ms=1_000,
        transaction_timeout_ms=60_000,
        transaction_version=2,
        end_txn_version=5,
    )
    fields.update(over)
    return Committable(**fields)


def _manifest(status: ManifestStatus, ids: list[str]) -> Manifest:
    return Manifest("p", 1, "p", "INCREMENTING", "t", status, [_committable(t) for t in ids], 1, 1)


def test_protected_ids_are_exactly_those_of_prepared_manifests():
    manifests = [
        ("uri-1", _manifest(ManifestStatus.COMMITTED, ["p-0-1"])),
        ("uri-2", _manifest(ManifestStatus.PREPARED, ["p-0-2", "p-1-2"])),
        ("uri-3", _manifest(ManifestStatus.ABORTED, ["p-0-3"])),
    ]
    assert set(prepared_index(manifests)) == {"p-0-2", "p-1-2"}
