"""Live progress from inside commit and abort, and a bulk abort sent as one batch (so it uses lanes).

The seed's bulk abort went in chunks of 50, below the ``MIN_PER_LANE`` (64) a lane needs, so a large
abort never spread over lanes and its progress moved per chunk. Now the whole plan goes to
``TransactionAdmin.abort`` at once and the admin reports every answer. ``MIN_PER_LANE`` is lowered
here (as in ``tests/kafka/admin/test_transactions_commit_lanes.py``) so six transactions make two lanes; the
shipped threshold pays off only at thousands. Each test ends with a ``read_committed`` key count.
"""

from __future__ import annotations

import threading

import pytest
from eos_cli_helpers import committable_of, open_transaction, run_cli_json

import airflow_provider_kafka_eos.kafka.protocol.lanes as lanes_module
from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    Manifest,
    ManifestStatus,
    manifest_uri,
    write_manifest,
)
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.operations.resolution import run_resolution
from airflow_provider_kafka_eos.kafka.operations.resolution_request import ResolutionRequest
from kafka_eos_testing.transactions import produce_transaction
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker

COUNT = 6


class Recorder:
    """``progress(done, total, label)`` as the CLI's bar receives it (from the lanes' threads)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, str]] = []
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, done: int, total: int, label: str) -> None:
        with self._lock:
            self.calls.append((done, total, label))
            self.threads.add(threading.current_thread().name)


def _keys(tid: str) -> list[bytes]:
    return [f"{tid}/{i}".encode() for i in range(3)]


def test_bulk_abort_is_one_batch_over_lanes_with_progress_per_answer(
    bootstrap, unique_name, store, monkeypatch
):
    monkeypatch.setattr(lanes_module, "AUTO_MIN_GROUP", 1)  # no lanes setting: 6 ids get lanes...
    monkeypatch.setattr(lanes_module, "AUTO_MAX_LANES", 2)  # ...2 of them
    topic, prefix = unique_name("prog-abort"), unique_name("pab") + "-"
    ids = [f"{prefix}{i}-1" for i in range(COUNT)]
    for tid in ids:
        open_transaction(bootstrap, tid, topic, _keys(tid))
    control = [b"kept-1", b"kept-2"]
    produce_transaction(bootstrap, unique_name("pab-control"), topic, control, commit=True)

    config = KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap})
    request = ResolutionRequest("abort", prefixes=(prefix,), min_age_ms=0, manifest_base_uri=store)
    bar = Recorder()
    with TransactionAdmin(config) as admin:
        batches: list[list[str]] = []
        real_abort = admin.abort

        def one_call(ids_, **kw):
            batches.append(list(ids_))
            return real_abort(ids_, **kw)

        admin.abort = one_call
        result = run_resolution(admin, request, progress=bar)
        lanes = admin.lanes_opened
    assert batches == [sorted(ids)]  # one batch, not chunks
    assert lanes == 2
    assert [r["outcome"] for r in result.rows] == ["aborted"] * COUNT
    # One call before anything is sent, then one per answer, in order, to the total.
    assert bar.calls == [(n, COUNT, "aborting") for n in range(COUNT + 1)]
    counts = count_keys(bootstrap, topic)
    assert_exactly_once(counts, control)
    assert not set(counts) - set(control)


def test_commit_of_a_checkpoint_reports_each_answer(bootstrap, unique_name, store):
    topic, prefix = unique_name("prog-commit"), unique_name("pcm") + "-"
    ids = [f"{prefix}{i}-4" for i in range(3)]
    for tid in ids:
        open_transaction(bootstrap, tid, topic, _keys(tid))
    committables = [committable_of(bootstrap, tid, 3) for tid in ids]
    uri = manifest_uri(store, "progress", 4)
    now = committables[0].prepared_at_ms
    write_manifest(
        uri,
        Manifest(
            pipeline_id="progress",
            checkpoint_id=4,
            transactional_id_prefix=prefix,
            naming_strategy="INCREMENTING",
            topic=topic,
            status=ManifestStatus.PREPARED,
            committables=committables,
            created_at_ms=now,
            updated_at_ms=now,
        ),
    )
    bar = Recorder()
    config = KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap})
    with TransactionAdmin(config) as admin:
        report = commit_checkpoint(admin, uri, committed_by="test", progress=bar)
    assert report.status == "committed"
    assert bar.calls == [(n, 3, "committing") for n in range(4)]
    assert_exactly_once(count_keys(bootstrap, topic), [k for tid in ids for k in _keys(tid)])


def test_both_spellings_of_bootstrap_server_agree(bootstrap, unique_name):
    topic, prefix = unique_name("two-ways"), unique_name("tw") + "-"
    tid = f"{prefix}0-1"
    open_transaction(bootstrap, tid, topic, _keys(tid))
    sub = run_cli_json("list", "--bootstrap-server", bootstrap, "--prefix", prefix)
    plural = run_cli_json("list", "--bootstrap-servers", bootstrap, "--prefix", prefix)
    assert sub == plural and [r["transactional_id"] for r in sub["rows"]] == [tid]
    described = run_cli_json("describe", "--bootstrap-server", bootstrap, "--transactional-id", tid)
    assert described["rows"][0]["state"] == "Ongoing"


@pytest.mark.provider_logic  # reads an Airflow connection: the Airflow side, not a Kafka behaviour
def test_conn_id_takes_the_client_and_the_manifest_store_from_airflow(
    bootstrap, unique_name, store, monkeypatch
):
    """``--conn-id`` names an Airflow connection, here given as ``AIRFLOW_CONN_*`` (Airflow's own
    environment secrets backend): the abort reaches the cluster and reads the manifest store both
    from it. One process, because importing Airflow costs seconds."""
    topic, prefix = unique_name("via-airflow"), unique_name("va") + "-"
    tid = f"{prefix}0-1"
    open_transaction(bootstrap, tid, topic, _keys(tid))
    control = [b"va-kept"]
    produce_transaction(bootstrap, unique_name("va-control"), topic, control, commit=True)
    extra = f'{{"bootstrap.servers": "{bootstrap}", "manifest_base_uri": "{store}"}}'
    monkeypatch.setenv("AIRFLOW_CONN_EOS_CLI_TEST", f'{{"conn_type": "kafka_eos", "extra": {extra}}}')
    aborted = run_cli_json("abort", "--conn-id", "eos_cli_test", "--transactional-id", tid)
    assert aborted["rows"][0]["outcome"] == "aborted"  # without the store it would have been refused
    counts = count_keys(bootstrap, topic)
    assert_exactly_once(counts, control)
    assert not set(counts) & set(_keys(tid))
