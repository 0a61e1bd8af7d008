"""Exactly once across a TV2 producer-id rotation at the epoch limit (issue 34), on the broker of the
pass (real Kafka 4.4 in the `apache` pass): the ids are aged to epoch 32765 with raw InitProducerId
rounds, as a POOLING pipeline ages them over weeks, so a prepare lands at 32766 and its commit (or
the coordinator's timeout-abort) rotates the producer id.

- a checkpoint whose commit was stopped after its rotating EndTxn (every id of it rotated): the
  rerun's restore and a second commit find it committed: manifest COMMITTED, no DataLossError,
  every key once;
- a single transaction committed again after its rotation (the CLI's hand-typed commit, no first
  offsets): already committed, from the coordinator's answer to the recorded pair;
- a timeout-abort at the rotation: the commit names the data loss and the timeout, the give-up
  works, and the next checkpoint on the same id is written exactly once.
"""

from __future__ import annotations

import time

import pytest
from ops_support import create_topic, keys_for, unique, wait_for_state
from txn_helpers import connect_admin

from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import abort_checkpoint, commit_checkpoint
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    Manifest,
    ManifestStatus,
    manifest_uri,
    read_manifest,
    write_manifest,
)
from airflow_provider_kafka_eos.kafka.checkpoints.restore import restore_pipeline
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
from airflow_provider_kafka_eos.kafka.errors import DataLossError
from airflow_provider_kafka_eos.kafka.operations.resolve_commit import committable_for
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable
from kafka_eos_testing.transactions import age_transactional_ids, produce_transaction
from kafka_eos_testing.verify import assert_exactly_once, count_keys

PREFIX = unique("rot")
KILLED = [f"{PREFIX}-0-1", f"{PREFIX}-1-1"]
SINGLE = f"{PREFIX}-2-1"
TIMED_OUT = f"{PREFIX}-3-1"


@pytest.fixture(scope="module")
def aged(kafka_broker):
    """Every id of the module at epoch 32765, aged side by side (about a minute on Kafka 4.4)."""
    with connect_admin(kafka_broker.bootstrap) as admin:
        reached = age_transactional_ids(admin, [*KILLED, SINGLE, TIMED_OUT], 32765)
    assert set(reached.values()) == {32765}
    return reached


def _prepare(bootstrap: str, admin, tid: str, topic: str, keys: list[bytes], partition: int,
             timeout_ms: int = 60_000) -> Committable:
    first = produce_transaction(bootstrap, tid, topic, keys, partitions=[partition],
                                transaction_timeout_ms=timeout_ms, **{"linger.ms": 0})
    d = admin.describe([tid])[tid]
    assert (d.state, d.producer_epoch) == ("Ongoing", 32766), d
    return Committable(tid, d.producer_id, d.producer_epoch, d.partitions, len(keys), int(time.time() * 1000),
                       d.start_time_ms, d.timeout_ms, 2, admin.end_txn_version(), first_offsets=first)


def _manifest(store: str, checkpoint: int, topic: str, committables: list[Committable]) -> str:
    uri = manifest_uri(store, PREFIX, checkpoint)
    now = int(time.time() * 1000)
    write_manifest(uri, Manifest(PREFIX, checkpoint, PREFIX, "POOLING", topic, ManifestStatus.PREPARED,
                                 committables, now, now))
    return uri


def _end_txn_then_die(admin, c: Committable) -> None:
    """The commit task's EndTxn reached the coordinator; the task died before it recorded anything."""
    from kafka.protocol.producer.transaction import EndTxnRequest

    node = admin.wire.coordinators([c.transactional_id]).get(c.transactional_id)
    answer = admin.wire.send(EndTxnRequest(transactional_id=c.transactional_id, producer_id=c.producer_id,
                                           producer_epoch=c.producer_epoch, committed=True,
                                           version=c.end_txn_version), node)
    assert answer.error_code == 0 and answer.producer_id != c.producer_id and answer.producer_epoch == 0


def _skip_below_tv2(admin) -> None:
    if admin.transaction_version() < 2:
        pytest.skip("the producer-id rotation at the epoch limit is transaction version 2's")


def test_a_commit_stopped_after_its_rotating_end_txn_is_committed_again_exactly_once(
        kafka_broker, admin, aged, empty_store):
    _skip_below_tv2(admin)
    topic = create_topic(kafka_broker.bootstrap, unique("rot-killed"), partitions=2)
    keys = {tid: keys_for(tid, 50) for tid in KILLED}
    committables = [_prepare(kafka_broker.bootstrap, admin, tid, topic, keys[tid], i) for i, tid in
                    enumerate(KILLED)]
    uri = _manifest(empty_store, 1, topic, committables)
    for c in committables:  # every id of the checkpoint rotated by the EndTxn that went through
        _end_txn_then_die(admin, c)

    store = ManifestStore(empty_store)
    report = restore_pipeline(admin, store=store, manifests=store.manifests(PREFIX), pipeline_id=PREFIX,
                              transactional_id_prefix=PREFIX, checkpoint_id=1,
                              abort_lingering=lambda *_: [])  # the rerun of the submit task
    assert report.existing is not None and report.existing.status is ManifestStatus.COMMITTED
    assert report.marked_aborted == []
    again = commit_checkpoint(admin, uri, committed_by="the commit task's retry")
    assert again.status == "already_committed"
    stored = read_manifest(uri)
    assert stored.status is ManifestStatus.COMMITTED
    pairs = stored.commit_report["answered_pairs"]
    assert all(pairs[c.transactional_id][0] != c.producer_id and pairs[c.transactional_id][1] == 0
               for c in committables), pairs  # the rotation is visible to every later reader
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [k for ks in keys.values() for k in ks])


def test_a_single_transaction_committed_again_after_its_rotation_is_already_committed(
        kafka_broker, admin, aged):
    _skip_below_tv2(admin)
    topic = create_topic(kafka_broker.bootstrap, unique("rot-single"))
    keys = keys_for(SINGLE, 20)
    c = _prepare(kafka_broker.bootstrap, admin, SINGLE, topic, keys, 0)
    _end_txn_then_die(admin, c)
    typed = committable_for(admin, SINGLE, c.producer_id, c.producer_epoch)  # the CLI's: no first offsets
    assert typed.first_offsets == ()
    (outcome,) = admin.commit([typed])
    assert outcome.outcome == "already_committed" and outcome.producer_epoch == 0
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), keys)


def test_a_timeout_abort_at_the_rotation_is_named_given_up_and_the_next_checkpoint_written(
        kafka_broker, admin, aged, empty_store):
    _skip_below_tv2(admin)
    topic = create_topic(kafka_broker.bootstrap, unique("rot-timeout"))
    lost_keys = keys_for(f"{TIMED_OUT}/lost", 10)
    c = _prepare(kafka_broker.bootstrap, admin, TIMED_OUT, topic, lost_keys, 0, timeout_ms=1_000)
    uri = _manifest(empty_store, 1, topic, [c])
    aborted = wait_for_state(admin, TIMED_OUT, {"CompleteAbort"}, timeout_s=40)
    assert aborted.producer_id != c.producer_id and aborted.producer_epoch == 0  # the abort rotated it

    with pytest.raises(DataLossError, match=r"(?s)transaction timeout.*aborted.*data-loss\.md"):
        commit_checkpoint(admin, uri, committed_by="the commit task")
    gave_up = abort_checkpoint(admin, uri, aborted_by="test give-up")
    assert gave_up.status == "aborted" and read_manifest(uri).status is ManifestStatus.ABORTED

    next_keys = keys_for(f"{TIMED_OUT}/next", 10)  # the next checkpoint reuses the id (POOLING)
    first = produce_transaction(kafka_broker.bootstrap, TIMED_OUT, topic, next_keys, partitions=[0],
                                **{"linger.ms": 0})
    d = admin.describe([TIMED_OUT])[TIMED_OUT]
    nxt = Committable(TIMED_OUT, d.producer_id, d.producer_epoch, d.partitions, 10, int(time.time() * 1000),
                      d.start_time_ms, d.timeout_ms, 2, admin.end_txn_version(), first_offsets=first)
    assert commit_checkpoint(admin, _manifest(empty_store, 2, topic, [nxt]), committed_by="next").status == \
        "committed"
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), next_keys)
