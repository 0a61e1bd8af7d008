"""The manifest store on a real S3-API server: conditional writes, racing committers, a racing give-up.

The S3 side is moto's server (tests/testing/test_s3_server.py proves its conditional writes first);
the Kafka side is the test run's broker. Every test that commits or aborts ends with a
read_committed consumer counting keys.
"""

from __future__ import annotations

import contextlib
import threading

import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.identity import RunIdentity
from airflow_provider_kafka_eos.kafka.checkpoints.input_claims import InputVerdict, claim_input
from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import abort_checkpoint, commit_checkpoint
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, read_manifest
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore, load_prepared
from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import (
    create_object,
    read_versioned,
    replace_if,
)
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import KafkaEosError, ManifestStoreError
from kafka_eos_testing.transactions import produce_transaction, write_prepared_manifest
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.broker]


def _admin(bootstrap: str) -> TransactionAdmin:
    return TransactionAdmin(KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap}))


def _prepared_checkpoint(kafka_broker, base: str, unique_name, partitions: int = 2) -> tuple[str, str, list]:
    """Open transactions of one checkpoint (as a Spark job leaves them) and its PREPARED manifest on S3."""
    prefix, topic = unique_name("s3ck"), unique_name("s3-topic")
    keys = []
    ids = [f"{prefix}-{p}-7" for p in range(partitions)]
    for p, tid in enumerate(ids):
        batch = [f"k{p}-{i}".encode() for i in range(5)]
        keys += batch
        produce_transaction(kafka_broker.bootstrap, tid, topic, batch, transaction_timeout_ms=600_000)
    with _admin(kafka_broker.bootstrap) as admin:
        uri = write_prepared_manifest(admin, base, prefix, topic, ids, checkpoint_id=7, prefix=prefix)
    assert uri.startswith("s3://")
    return uri, topic, keys


def test_objects_are_created_once_and_replaced_only_if_unchanged(s3_base):
    uri = f"{s3_base}/p/_inputs/x.json"
    assert create_object(uri, b"one") is True
    assert create_object(uri, b"two") is False
    data, etag = read_versioned(uri)
    assert data == b"one" and etag
    assert replace_if(uri, b"three", etag) is True
    assert replace_if(uri, b"stale", etag) is False  # someone (we) changed it since etag was read
    assert read_versioned(uri)[0] == b"three"
    assert replace_if(f"{s3_base}/p/missing.json", b"x", etag) is False


def test_runs_of_one_input_racing_on_s3_claim_it_exactly_once(s3_base):
    store = ManifestStore.configured(s3_base)
    start = threading.Barrier(6)
    outcomes = []

    def run(i: int) -> None:
        start.wait(timeout=30)
        outcomes.append(claim_input(store, pipeline_id="orders", input_id="B1", checkpoint_id=100 + i,
                                    run=RunIdentity("eos_pipeline", f"manual__{i}", 1, None),
                                    run_is_active=lambda r: True, timeout_s=0))

    threads = [threading.Thread(target=lambda i=i: _swallow_busy(run, i)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert [o.verdict for o in outcomes] == [InputVerdict.WRITE]  # the others found a claim being written


def _swallow_busy(run, i):
    """A loser finds the winner's claim with no manifest yet (timeout_s=0): busy, nothing written."""
    from airflow_provider_kafka_eos.kafka.errors import InputBusyError

    with contextlib.suppress(InputBusyError):
        run(i)


def test_eight_concurrent_commits_of_one_manifest_one_commits_seven_report_already_committed(
    kafka_broker, s3_base, unique_name
):
    uri, topic, keys = _prepared_checkpoint(kafka_broker, s3_base, unique_name)
    start = threading.Barrier(8)
    reports, errors = {}, []

    def commit(i: int) -> None:
        try:
            with _admin(kafka_broker.bootstrap) as admin:
                start.wait(timeout=30)
                reports[i] = commit_checkpoint(admin, uri, committed_by=f"worker-{i}")
        except Exception as exc:  # collected: the assertion below names it
            errors.append(exc)

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == [] and len(reports) == 8, [str(e) for e in errors]
    sent = [i for i, r in reports.items() if r.sent_commit]
    assert len(sent) >= 1  # EndTxn is idempotent: more than one may have sent it, each says so
    manifest = read_manifest(uri)
    assert manifest.status is ManifestStatus.COMMITTED
    stored = manifest.commit_report
    # The stored report names a committer that really sent the commit, never an already_committed one.
    assert any(f"worker-{i}" in stored["committed_by"] for i in sent), stored
    assert all(reports[i].status == "already_committed" for i in reports if i not in sent)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), keys)


def test_a_commit_racing_a_give_up_one_wins_and_the_other_says_so(kafka_broker, s3_base, unique_name):
    uri, topic, keys = _prepared_checkpoint(kafka_broker, s3_base, unique_name)
    start = threading.Barrier(2)
    results: dict[str, object] = {}

    def side(name: str, act) -> None:
        with _admin(kafka_broker.bootstrap) as admin:
            start.wait(timeout=30)
            try:
                results[name] = act(admin)
            except KafkaEosError as exc:  # the loser's named refusal is its result
                results[name] = exc

    threads = [
        threading.Thread(target=side, args=("commit", lambda a: commit_checkpoint(a, uri, committed_by="c"))),
        threading.Thread(target=side, args=("give_up", lambda a: abort_checkpoint(a, uri, aborted_by="op"))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    status = read_manifest(uri).status
    counts = count_keys(kafka_broker.bootstrap, topic)
    if status is ManifestStatus.COMMITTED:
        assert not isinstance(results["commit"], Exception), results
        assert isinstance(results["give_up"], KafkaEosError), results  # it says the commit won
        assert "committed" in str(results["give_up"]).lower()
        assert_exactly_once(counts, keys)
    else:
        assert status is ManifestStatus.ABORTED, results
        assert isinstance(results["commit"], KafkaEosError), results  # data loss or fenced, named
        assert results["give_up"].status == "aborted"
        assert counts == {}, (counts, results)  # nothing of the given-up batch is visible


def test_a_missing_bucket_or_an_unreachable_store_is_named_and_nothing_is_aborted(s3_server, monkeypatch):
    import s3fs

    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    s3fs.S3FileSystem.clear_instance_cache()
    with pytest.raises(ManifestStoreError, match=r"manifest store s3://no-such-bucket/m .* does not exist"):
        load_prepared("s3://no-such-bucket/m")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")  # nothing listens there
    s3fs.S3FileSystem.clear_instance_cache()
    with pytest.raises(ManifestStoreError, match=r"manifest store s3://any-bucket/m .* cannot be read"):
        load_prepared("s3://any-bucket/m")


def test_prepare_commit_then_a_rerun_writes_nothing_and_an_abandoned_checkpoint_is_given_up(
    kafka_broker, s3_base, unique_name
):
    """The lifecycle's plain path on S3: commit, the checkpoint's rerun (restore finds it COMMITTED and
    says it will not be produced again), and a second checkpoint abandoned then given up."""
    from airflow_provider_kafka_eos.kafka.checkpoints.restore import restore_pipeline

    uri, topic, keys = _prepared_checkpoint(kafka_broker, s3_base, unique_name)
    prefix = uri.split("/")[-2]
    with _admin(kafka_broker.bootstrap) as admin:
        assert commit_checkpoint(admin, uri, committed_by="s3-test").sent_commit
        store = ManifestStore(s3_base)
        rerun = restore_pipeline(admin, store=store, manifests=store.manifests(prefix), pipeline_id=prefix,
                                 transactional_id_prefix=prefix, checkpoint_id=7,
                                 abort_lingering=lambda *_: [])
    assert rerun.existing is not None and rerun.existing.status is ManifestStatus.COMMITTED
    assert rerun.existing_uri == uri and rerun.recommitted == [] and rerun.marked_aborted == []
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), keys)

    abandoned, abandoned_topic, _ = _prepared_checkpoint(kafka_broker, s3_base, unique_name)
    with _admin(kafka_broker.bootstrap) as admin:
        report = abort_checkpoint(admin, abandoned, aborted_by="s3-test")
    assert report.status != "already_aborted", report
    assert read_manifest(abandoned).status is ManifestStatus.ABORTED
    assert count_keys(kafka_broker.bootstrap, abandoned_topic) == {}
    assert count_keys(kafka_broker.bootstrap, abandoned_topic, isolation="read_uncommitted")  # written
