"""Two runs of one pipeline writing at once: the second queues behind the first's vote.

The trigger soak (docs/soak.md) measured what happened without the writer lease: a run's restore aborted
the transactions another run had prepared but not yet voted (listed in no manifest), and that batch's
commit then failed with DataLossError. Here run A is held after it prepared, before its vote; run B
(a backfill: an older checkpoint id) must neither abort A's transactions nor prepare beside it.
"""

from __future__ import annotations

import threading

import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, manifest_uri, read_manifest
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import PipelineBusyError
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import TxnState
from airflow_provider_kafka_eos.spark import writer
from airflow_provider_kafka_eos.spark.writer import write_exactly_once
from kafka_eos_testing.spark import commit_manifest, keyed_frame
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def test_a_second_run_waits_for_the_first_ones_vote_and_aborts_nothing_of_it(
    spark, kafka_broker, tmp_path, unique_name, monkeypatch
):
    prefix, topic = unique_name("overlap"), unique_name("out")
    base = str(tmp_path)
    prepared, vote = threading.Event(), threading.Event()
    verify = writer._verify_still_prepared

    def hold_run_a(admin, committables):
        if threading.current_thread().name == "run-a":  # run A: prepared, its vote not written yet
            prepared.set()
            assert vote.wait(timeout=120), "the test never let run A vote"
        verify(admin, committables)

    monkeypatch.setattr(writer, "_verify_still_prepared", hold_run_a)

    def write(tag, checkpoint, wait_s, results):
        try:
            results[tag] = write_exactly_once(
                keyed_frame(spark, tag, 200, 2), topic=topic, kafka_config=kafka_broker.client_config(),
                transactional_id_prefix=prefix, checkpoint_id=checkpoint, manifest_base_uri=base,
                writer_wait_s=wait_s)
        except Exception as exc:  # handed to the test's thread
            results[tag] = exc

    results: dict = {}
    run_a = threading.Thread(target=write, args=("a", 2, 60, results), name="run-a")
    run_a.start()
    assert prepared.wait(timeout=180), f"run A did not prepare: {results.get('a')!r}"

    # Run B starts while A's transactions are open and in no manifest: it waits, then refuses.
    with pytest.raises(PipelineBusyError, match=r"checkpoint 1 cannot start.*checkpoint 2"):
        write_exactly_once(keyed_frame(spark, "b", 200, 2), topic=topic,
                           kafka_config=kafka_broker.client_config(), transactional_id_prefix=prefix,
                           checkpoint_id=1, manifest_base_uri=base, writer_wait_s=1)
    ids_a = [f"{prefix}-{p}-2" for p in range(2)]
    with TransactionAdmin(KafkaClientConfig.from_mapping(kafka_broker.client_config())) as admin:
        states = {tid: d.state for tid, d in admin.describe(ids_a).items()}
    assert states == dict.fromkeys(ids_a, TxnState.ONGOING)  # nothing of run A was aborted

    # B's retry queues behind A; A votes; B then restores (committing A's vote) and writes.
    run_b = threading.Thread(target=write, args=("b", 1, 120, results), name="run-b")
    run_b.start()
    vote.set()
    run_a.join(timeout=180)
    run_b.join(timeout=180)
    assert not run_a.is_alive() and not run_b.is_alive()
    manifest_a, manifest_b = results["a"], results["b"]
    assert not isinstance(manifest_a, Exception), manifest_a
    assert not isinstance(manifest_b, Exception), manifest_b
    assert read_manifest(manifest_uri(base, prefix, 2)).status is ManifestStatus.COMMITTED  # by B's restore
    commit_manifest(kafka_broker.bootstrap, manifest_b)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic),
                        [f"{tag}-{i}" for tag in "ab" for i in range(200)])
