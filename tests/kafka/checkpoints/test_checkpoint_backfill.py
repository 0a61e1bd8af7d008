"""Backfills and out-of-order runs: a checkpoint id lower than ones already committed.

A backfill of an older interval prepares a checkpoint whose id is smaller than checkpoints the
pipeline already committed (and maybe than one still PREPARED). Restore and both abort
strategies must handle it: every PREPARED manifest is committed (older or newer), the backfill's
own leftovers are aborted, and nothing a manifest lists is ever aborted or fenced. One test per
strategy (LISTING, PROBING) and naming strategy (INCREMENTING, POOLING), real transactions on
the broker, each ending with a read_committed consumer counting keys.
"""

from __future__ import annotations

import pytest
from ops_support import client_config, create_topic, keys_for, open_transaction, unique

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.abort_strategies import AbortStrategy, probing_ceiling
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    ManifestStatus,
    find_manifests,
    manifest_uri,
    read_manifest,
    write_manifest,
)
from airflow_provider_kafka_eos.kafka.checkpoints.naming import NamingStrategy
from airflow_provider_kafka_eos.kafka.checkpoints.restore import restore_pipeline
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
from kafka_eos_testing.transactions import produce_transaction, write_prepared_manifest
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def admin(kafka_broker):
    with TransactionAdmin(client_config(kafka_broker.bootstrap)) as txn_admin:
        yield txn_admin


def _aborter(strategy: str, checkpoint_id: int, partitions: int, base: str, pipeline: str):
    """The aborter the writer hands restore (PROBING's ceiling: the next checkpoint with a manifest)."""
    return AbortStrategy.parse(strategy).aborter(
        checkpoint_id=checkpoint_id, partitions_hint=partitions,
        stop_before=probing_ceiling(find_manifests(base, pipeline), checkpoint_id))


def _committed_checkpoint(bootstrap, admin, base, pipeline, topic, tids, checkpoint_id,
                          naming="INCREMENTING"):
    """A checkpoint prepared, committed and marked COMMITTED, as the commit task leaves it."""
    keys = []
    for tid in tids:
        keys += keys_for(f"{tid}@{checkpoint_id}", 3)
        open_transaction(bootstrap, admin, tid, topic, keys_for(f"{tid}@{checkpoint_id}", 3))
    uri = write_prepared_manifest(admin, base, pipeline, topic, tids, checkpoint_id=checkpoint_id)
    manifest = read_manifest(uri)
    admin.commit(manifest.committables)
    manifest.status, manifest.naming_strategy = ManifestStatus.COMMITTED, naming
    write_manifest(uri, manifest)
    return keys


def _restore(admin, base, pipeline, checkpoint_id, aborter):
    store = ManifestStore(base)
    return restore_pipeline(admin, store=store, manifests=store.manifests(pipeline), pipeline_id=pipeline,
                            transactional_id_prefix=pipeline, checkpoint_id=checkpoint_id,
                            abort_lingering=aborter)


def _epoch(admin, tid):
    d = admin.describe([tid])[tid]
    return d.state, d.producer_id, d.producer_epoch


@pytest.mark.parametrize("strategy", ["LISTING", "PROBING"])
def test_backfill_after_newer_committed_and_prepared_checkpoints_is_written_exactly_once(
    kafka_broker, admin, tmp_path, strategy
):
    """INCREMENTING ids. Newer: 3000 COMMITTED, 4000 PREPARED. The backfill 2000 had a crashed
    attempt (its transaction left open, no manifest). Restore commits 4000, aborts only the
    crashed attempt, and the backfill writes its own fresh ids."""
    bootstrap, base = kafka_broker.bootstrap, str(tmp_path)
    pipeline, topic = unique("bf").replace("-", "_"), create_topic(bootstrap, unique("bf-out"))
    expected = _committed_checkpoint(bootstrap, admin, base, pipeline, topic, [f"{pipeline}-0-3000"], 3000)
    prepared_tid = f"{pipeline}-0-4000"
    open_transaction(bootstrap, admin, prepared_tid, topic, keys_for(prepared_tid, 4))
    newer_uri = write_prepared_manifest(admin, base, pipeline, topic, [prepared_tid], checkpoint_id=4000)
    expected += keys_for(prepared_tid, 4)
    crashed_tid = f"{pipeline}-0-2000"
    open_transaction(bootstrap, admin, crashed_tid, topic, [b"crashed-attempt"])

    report = _restore(admin, base, pipeline, 2000, _aborter(strategy, 2000, 1, base, pipeline))

    assert report.existing is None  # the backfill has no manifest: it is written
    assert report.recommitted == [newer_uri]
    assert report.aborted_transactions == [crashed_tid]
    backfill_ids = NamingStrategy.INCREMENTING.id_factory(pipeline, 2000, partitions=1)
    assert backfill_ids(0) == crashed_tid  # the same id as its crashed attempt: fenced by the retry
    produce_transaction(bootstrap, backfill_ids(0), topic, keys_for("backfill", 5), commit=True)
    expected += keys_for("backfill", 5)
    assert_exactly_once(count_keys(bootstrap, topic), expected)


def test_probing_a_backfill_never_walks_into_a_newer_checkpoints_ids(kafka_broker, admin, tmp_path):
    """Explicit, consecutive checkpoint ids (dedupe by input): the backfill 2000 after 2001
    (COMMITTED) and 2002 (PREPARED). PROBING walks upward from 2000 while ids were used; it must
    stop before 2001: those ids are the newer checkpoints' own (fencing even a committed one bumps
    its epoch under the manifest that names it)."""
    bootstrap, base = kafka_broker.bootstrap, str(tmp_path)
    pipeline, topic = unique("probe").replace("-", "_"), create_topic(bootstrap, unique("pr-out"))
    committed_tid, prepared_tid, crashed_tid = (f"{pipeline}-0-{c}" for c in (2001, 2002, 2000))
    expected = _committed_checkpoint(bootstrap, admin, base, pipeline, topic, [committed_tid], 2001)
    open_transaction(bootstrap, admin, prepared_tid, topic, keys_for(prepared_tid, 2))
    write_prepared_manifest(admin, base, pipeline, topic, [prepared_tid], checkpoint_id=2002)
    expected += keys_for(prepared_tid, 2)
    open_transaction(bootstrap, admin, crashed_tid, topic, [b"crashed-attempt"])
    committed_before = _epoch(admin, committed_tid)

    report = _restore(admin, base, pipeline, 2000, _aborter("PROBING", 2000, 1, base, pipeline))

    assert report.aborted_transactions == [crashed_tid]
    assert _epoch(admin, committed_tid) == committed_before  # never fenced
    recommitted = read_manifest(manifest_uri(base, pipeline, 2002))
    assert recommitted.status is ManifestStatus.COMMITTED
    state, pid, _ = _epoch(admin, prepared_tid)
    assert state == "CompleteCommit" and pid == recommitted.committables[0].producer_id
    # A second commit of each newer checkpoint is still idempotent: their epochs were not moved.
    for checkpoint in (2001, 2002):
        outcomes = admin.commit(read_manifest(manifest_uri(base, pipeline, checkpoint)).committables)
        assert [o.outcome for o in outcomes] == ["already_committed"], checkpoint
    produce_transaction(bootstrap, crashed_tid, topic, keys_for("backfill", 3), commit=True)
    expected += keys_for("backfill", 3)
    assert_exactly_once(count_keys(bootstrap, topic), expected)


def test_pooling_backfill_after_a_newer_checkpoint_reuses_only_free_slots(kafka_broker, admin, tmp_path):
    """POOLING ids do not depend on the checkpoint: a backfill (1000) after a COMMITTED 2000 and a
    PREPARED 3000 gets slots that no open or PREPARED transaction holds."""
    bootstrap, base = kafka_broker.bootstrap, str(tmp_path)
    pipeline, topic = unique("pool").replace("-", "_"), create_topic(bootstrap, unique("po-out"), 2)
    expected = _committed_checkpoint(bootstrap, admin, base, pipeline, topic,
                                     [f"{pipeline}-0-0", f"{pipeline}-1-0"], 2000, naming="POOLING")
    prepared = [f"{pipeline}-0-1", f"{pipeline}-1-0"]  # slot 1 of partition 0, slot 0 of partition 1
    for tid in prepared:
        partition = int(tid.rsplit("-", 2)[1])
        open_transaction(bootstrap, admin, tid, topic, keys_for(f"{tid}@3000", 2), partitions=(partition,))
        expected += keys_for(f"{tid}@3000", 2)
    uri = write_prepared_manifest(admin, base, pipeline, topic, prepared, checkpoint_id=3000)
    manifest = read_manifest(uri)
    manifest.naming_strategy = "POOLING"
    write_manifest(uri, manifest)

    # Restore with the PREPARED manifest still pending elsewhere is what POOLING must respect:
    # take the in-use set before restore commits it, as a concurrent reader of the store would.
    in_use = NamingStrategy.POOLING.ids_in_use(admin, pipeline, prepared)
    ids = NamingStrategy.POOLING.id_factory(pipeline, 1000, partitions=2, in_use=in_use)
    assert {ids(0), ids(1)}.isdisjoint(in_use)
    assert [ids(0), ids(1)] == [f"{pipeline}-0-0", f"{pipeline}-1-1"]

    report = _restore(admin, base, pipeline, 1000, _aborter("LISTING", 1000, 2, base, pipeline))
    assert report.recommitted == [uri] and report.aborted_transactions == []
    for partition in (0, 1):
        produce_transaction(bootstrap, ids(partition), topic, keys_for(f"backfill-{partition}", 3),
                            partitions=[partition], commit=True)
        expected += keys_for(f"backfill-{partition}", 3)
    assert_exactly_once(count_keys(bootstrap, topic), expected)
