"""``find-hanging --topic`` and ``abort-partition``: a partition's open transaction ended by an admin
ABORT marker (KIP-664 WriteTxnMarkers through kafka-python), with no JVM tool.

The first test makes a truly hanging transaction: on a broker started with
``transaction.partition.verification.enable=false`` a transactional batch of a producer no
coordinator knows is sent as Produce v11 without AddPartitionsToTxn
(``kafka_eos_testing.transactions.write_hanging_transaction``, the provider's own record-batch
encoder), so nothing but a marker on the partition will ever end it. The second aborts a
transaction the coordinator still owns, as Kafka's own tests of the admin abort do, naming its
producer id and epoch and passing ``--force`` (the refusal without it is checked first).
Kafka-facing: the real-Kafka pass runs both on Apache Kafka 4.4 (``KAFKA_EOS_TEST_KAFKA=apache``).
Each ends with a ``read_committed`` count of every key.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from eos_cli_helpers import committable_of, run_cli, run_cli_json, wait_for_state

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    Manifest,
    ManifestStatus,
    manifest_uri,
    write_manifest,
)
from kafka_eos_testing.broker.txn_testkit import end_offsets
from kafka_eos_testing.transactions import produce_transaction, write_hanging_transaction
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker


def _topic(bootstrap: str, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, 2, 1)], operation_timeout=10).values():
        future.result(timeout=15)
    return name


def _prepared_manifest(store: str, prefix: str, topic: str, committable) -> str:
    now = int(time.time() * 1000)
    uri = manifest_uri(store, "hanging", 3)
    write_manifest(
        uri,
        Manifest(
            pipeline_id="hanging",
            checkpoint_id=3,
            transactional_id_prefix=prefix,
            naming_strategy="INCREMENTING",
            topic=topic,
            status=ManifestStatus.PREPARED,
            committables=[committable],
            created_at_ms=now,
            updated_at_ms=now,
        ),
    )
    return uri


def test_a_hanging_transaction_is_found_and_aborted_on_its_partition_and_consumers_read_past_it(
    kafka_broker_factory, unique_name, store
):
    """Committed records before and after a hanging transaction on one partition: read_committed
    consumers stop at its first offset (LSO < HW) until ``abort-partition`` writes the marker; then
    the LSO reaches the high watermark and every committed key is read exactly once, none of the
    hanging ones. A dedicated broker: partition verification is off only there."""
    bootstrap = kafka_broker_factory(transaction_partition_verification=False).bootstrap
    topic = _topic(bootstrap, unique_name("hanging"))
    before = [f"b{i}".encode() for i in range(5)]
    stuck = [f"h{i}".encode() for i in range(4)]
    after = [f"a{i}".encode() for i in range(6)]
    produce_transaction(bootstrap, unique_name("before"), topic, before, partitions=[0], commit=True)
    pid, epoch = write_hanging_transaction(bootstrap, topic, 0, stuck)
    produce_transaction(bootstrap, unique_name("after"), topic, after, partitions=[0], commit=True)

    scan = run_cli_json("find-hanging", "--bootstrap-server", bootstrap, "--topic", topic)
    (row,) = scan["rows"]
    assert (row["partition"], row["producer_id"], row["producer_epoch"]) == (0, pid, epoch)
    assert (row["hanging"], row["holds_lso"], row["coordinator_state"], row["transactional_id"]) == (
        True,
        True,
        "(no entry)",
        "",
    )
    assert row["next_step"] == (
        f"abort-partition --topic {topic} --partition 0 --producer-id {pid} --epoch {epoch}"
    )
    lso, high_watermark = end_offsets(bootstrap, topic, 0)
    assert lso == row["txn_start_offset"] < high_watermark  # consumers are pinned at its first record
    assert count_keys(bootstrap, topic) == {k: 1 for k in before}  # "after" is committed but past the LSO

    # The only hanging transaction of the partition: no --producer-id, no --force needed.
    target = ("--bootstrap-server", bootstrap, "--topic", topic, "--partition", "0")
    done = run_cli_json("abort-partition", *target, "--manifest-base", store)
    assert (done["rows"][0]["producer_id"], done["rows"][0]["outcome"]) == (pid, "aborted")
    assert run_cli_json("find-hanging", "--bootstrap-server", bootstrap, "--topic", topic)["rows"] == []
    lso, high_watermark = end_offsets(bootstrap, topic, 0)
    assert lso == high_watermark
    counts = count_keys(bootstrap, topic)
    assert_exactly_once(counts, before + after)
    assert not set(counts) & set(stuck)


def test_abort_partition_refuses_owned_and_prepared_then_aborts_with_markers(
    bootstrap, unique_name, store, tmp_path
):
    topic = _topic(bootstrap, unique_name("hang-part"))
    prefix = unique_name("hangp") + "-"
    tid = f"{prefix}0-1"
    committed = [f"c{i}".encode() for i in range(5)]
    stuck = [f"s{i}".encode() for i in range(4)]
    produce_transaction(
        bootstrap, unique_name("hang-committed"), topic, committed, partitions=[0], commit=True
    )
    # Left open on partition 1, as a prepared Spark task leaves it (the producer is dropped, not closed).
    produce_transaction(bootstrap, tid, topic, stuck, partitions=[1], transaction_timeout_ms=120_000)
    assert count_keys(bootstrap, topic) == {k: 1 for k in committed}  # its records sit past the LSO

    scan = run_cli_json("find-hanging", "--bootstrap-server", bootstrap, "--topic", topic)
    (row,) = scan["rows"]
    assert (row["transactional_id"], row["coordinator_state"], row["hanging"]) == (tid, "Ongoing", False)
    assert row["next_step"] == f"owned by {tid} (Ongoing): see find-hanging --prefix"
    plural = run_cli_json("find-hanging", "--bootstrap-servers", bootstrap, "--topic", topic)
    assert plural["rows"] == scan["rows"]
    partition, pid, epoch = str(row["partition"]), str(row["producer_id"]), str(row["producer_epoch"])
    target = ("--bootstrap-server", bootstrap, "--topic", topic, "--partition", partition)

    # Not hanging: refused, pointing at the id; and with no --producer-id there is no hanging one to pick.
    owned = run_cli(
        "abort-partition", *target, "--manifest-base", store, "--producer-id", pid, "--epoch", epoch
    )
    assert owned.returncode == 1 and f"abort --transactional-id {tid}" in owned.stderr
    none = run_cli("abort-partition", *target, "--manifest-base", store)
    assert none.returncode == 2 and "has 0 hanging transaction(s) (of 1 open)" in none.stderr
    wrong_epoch = run_cli(
        "abort-partition",
        *target,
        "--manifest-base",
        store,
        "--producer-id",
        pid,
        "--epoch",
        str(int(epoch) + 1),
    )
    assert wrong_epoch.returncode == 1 and f"with epoch {epoch}, not {int(epoch) + 1}" in wrong_epoch.stderr

    # A PREPARED manifest lists the producer: refused even with --force (its batch must commit).
    other = tmp_path / "guarded"
    other.mkdir()
    uri = _prepared_manifest(other.as_uri(), prefix, topic, committable_of(bootstrap, tid, len(stuck)))
    guarded = run_cli(
        "abort-partition",
        *target,
        "--manifest-base",
        other.as_uri(),
        "--producer-id",
        pid,
        "--epoch",
        epoch,
        "--force",
        "--json",
    )
    assert guarded.returncode == 1
    assert f"listed in the PREPARED manifest {uri}" in json.loads(guarded.stdout)["error"]
    # No manifest store at all: refused as every abort is (nothing was read, nothing changed).
    blind = run_cli("abort-partition", *target, "--producer-id", pid, "--epoch", epoch, "--force")
    assert blind.returncode == 1 and "no manifest store is configured" in blind.stderr
    assert count_keys(bootstrap, topic) == {k: 1 for k in committed}

    dry = run_cli_json(
        "abort-partition",
        *target,
        "--manifest-base",
        store,
        "--producer-id",
        pid,
        "--epoch",
        epoch,
        "--force",
        "--dry-run",
    )
    assert dry["rows"][0]["outcome"] == "would abort"
    done = run_cli_json(
        "abort-partition",
        *target,
        "--manifest-base",
        store,
        "--producer-id",
        pid,
        "--epoch",
        epoch,
        "--force",
    )
    assert done["rows"][0]["outcome"] == "aborted"
    after = run_cli_json("find-hanging", "--bootstrap-server", bootstrap, "--topic", topic)
    assert after["rows"] == []  # the marker closed it on the partition: the LSO moved on
    # The coordinator still thinks it open; the ordinary abort ends it there too.
    assert (
        run_cli(
            "abort", "--bootstrap-server", bootstrap, "--manifest-base", store, "--transactional-id", tid
        ).returncode
        == 0
    )
    wait_for_state(bootstrap, tid, "CompleteAbort", "Empty")
    counts = count_keys(bootstrap, topic)
    assert_exactly_once(counts, committed)
    assert not set(counts) & set(stuck)
