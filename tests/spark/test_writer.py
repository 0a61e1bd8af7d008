"""write_exactly_once in local Spark against the embedded broker.

Every test ends with a read_committed consumer: each expected key exactly once, nothing else.
"""

from __future__ import annotations

import time

import pytest
from counting_store import CountingStore

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    ManifestStatus,
    find_manifests,
    manifest_uri,
    read_manifest,
)
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import SpeculativeExecutionError
from airflow_provider_kafka_eos.kafka.producers.librdkafka import PartitionTransaction, TransactionProtocol
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import TxnState
from airflow_provider_kafka_eos.spark.faults import FaultPlan
from airflow_provider_kafka_eos.spark.writer import write_exactly_once
from kafka_eos_testing.spark import commit_manifest, keyed_frame
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def _write(df, broker, base, prefix, topic, checkpoint, **kwargs):
    return write_exactly_once(
        df,
        topic=topic,
        kafka_config=broker.client_config(),
        transactional_id_prefix=prefix,
        checkpoint_id=checkpoint,
        manifest_base_uri=str(base),
        **kwargs,
    )


def _keys(tag, n):
    return [f"{tag}-{i}" for i in range(n)]


def _admin(broker):
    return TransactionAdmin(KafkaClientConfig.from_mapping(broker.client_config()))


def test_prepare_is_invisible_until_commit_and_a_rerun_does_not_produce_again(
    spark, kafka_broker, tmp_path, unique_name
):
    prefix, topic = unique_name("pipe"), unique_name("out")
    df = keyed_frame(spark, "a", 300, 3)
    manifest = _write(df, kafka_broker, tmp_path, prefix, topic, 1)

    uri = manifest_uri(str(tmp_path), prefix, 1)
    assert read_manifest(uri).status is ManifestStatus.PREPARED
    assert len(manifest.committables) == 3
    assert sum(c.record_count for c in manifest.committables) == 300
    assert {c.transactional_id for c in manifest.committables} == {f"{prefix}-{p}-1" for p in range(3)}
    assert count_keys(kafka_broker.bootstrap, topic) == {}  # prepared: nothing visible yet

    again = _write(df, kafka_broker, tmp_path, prefix, topic, 1)  # a retried submit task
    assert again.committables == manifest.committables
    assert sum(count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted").values()) == 300

    commit_manifest(kafka_broker.bootstrap, manifest)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys("a", 300))


def test_empty_partitions_give_no_committable(spark, kafka_broker, tmp_path, unique_name):
    """Invariant 5: 4 partitions, rows in 2 of them -> 2 committables."""
    prefix, topic = unique_name("sparse"), unique_name("out")
    df = keyed_frame(spark, "s", 4, 4).filter("key in ('s-1', 's-2')")  # one row per partition
    assert df.rdd.getNumPartitions() == 4
    manifest = _write(df, kafka_broker, tmp_path, prefix, topic, 5)
    assert sorted(c.transactional_id for c in manifest.committables) == [f"{prefix}-1-5", f"{prefix}-2-5"]
    assert all(c.record_count > 0 for c in manifest.committables)
    commit_manifest(kafka_broker.bootstrap, manifest)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), ["s-1", "s-2"])


def test_next_checkpoint_commits_a_prepared_one_whose_commit_never_ran(
    spark, kafka_broker, tmp_path, unique_name
):
    prefix, topic = unique_name("recommit"), unique_name("out")
    _write(keyed_frame(spark, "c1", 100, 2), kafka_broker, tmp_path, prefix, topic, 1)
    second = _write(keyed_frame(spark, "c2", 100, 2), kafka_broker, tmp_path, prefix, topic, 2)
    first = read_manifest(manifest_uri(str(tmp_path), prefix, 1))
    assert first.status is ManifestStatus.COMMITTED
    assert first.commit_report["committed_by"] == "restore"
    commit_manifest(kafka_broker.bootstrap, second)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys("c1", 100) + _keys("c2", 100))


@pytest.mark.parametrize("naming_strategy", ["INCREMENTING", "POOLING"])
def test_partition_count_changes_between_checkpoints(
    spark, kafka_broker, tmp_path, unique_name, naming_strategy
):
    """4 partitions, then 2, then 3; a crashed wider attempt's leftover is aborted by restore."""
    prefix, topic = unique_name(f"scale-{naming_strategy.lower()}"), unique_name("out")
    expected = []
    ids_seen = []
    for checkpoint, partitions in ((1, 4), (2, 2), (3, 3)):
        tag = f"c{checkpoint}"
        if checkpoint == 2:
            _leave_open_transaction(kafka_broker, f"{prefix}-3-9", topic, ["stray-0", "stray-1"])
        manifest = _write(
            keyed_frame(spark, tag, 120, partitions),
            kafka_broker,
            tmp_path,
            prefix,
            topic,
            checkpoint,
            naming_strategy=naming_strategy,
        )
        assert len(manifest.committables) == partitions
        ids_seen.append(sorted(c.transactional_id for c in manifest.committables))
        commit_manifest(kafka_broker.bootstrap, manifest)
        expected += _keys(tag, 120)
    with _admin(kafka_broker) as admin:
        # aborted by fencing (the fence leaves the id Empty at a higher epoch), not committed
        assert admin.describe([f"{prefix}-3-9"])[f"{prefix}-3-9"].state in (
            TxnState.COMPLETE_ABORT,
            TxnState.EMPTY,
        )
    if naming_strategy == "POOLING":  # ids are reused: slot 0 of each partition every time
        assert ids_seen[1] == [f"{prefix}-{p}-0" for p in range(2)]
        assert ids_seen[2] == [f"{prefix}-{p}-0" for p in range(3)]
    else:
        assert ids_seen[2] == [f"{prefix}-{p}-3" for p in range(3)]
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), expected)


def test_another_pipeline_beside_it_is_never_touched(spark, kafka_broker, tmp_path, unique_name):
    """Invariant 4: prefix ``p`` never aborts ``p-x``'s transactions, prepared or open."""
    prefix = unique_name("pipe")
    neighbour = f"{prefix}-x"  # shares the prefix text, not the prefix
    topic, neighbour_topic = unique_name("out"), unique_name("nout")
    neighbour_manifest = _write(
        keyed_frame(spark, "n", 50, 2), kafka_broker, tmp_path, neighbour, neighbour_topic, 1
    )
    _leave_open_transaction(kafka_broker, f"{neighbour}-7-1", neighbour_topic, ["lingering"])

    manifest = _write(keyed_frame(spark, "m", 50, 2), kafka_broker, tmp_path, prefix, topic, 1)
    commit_manifest(kafka_broker.bootstrap, manifest)

    with _admin(kafka_broker) as admin:
        states = admin.describe(
            [c.transactional_id for c in neighbour_manifest.committables] + [f"{neighbour}-7-1"]
        )
    assert {d.state for d in states.values()} == {TxnState.ONGOING}
    commit_manifest(kafka_broker.bootstrap, neighbour_manifest)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys("m", 50))
    with _admin(kafka_broker) as admin:  # unblock the neighbour's topic for its consumers
        admin.abort([f"{neighbour}-7-1"])
    assert_exactly_once(count_keys(kafka_broker.bootstrap, neighbour_topic), _keys("n", 50))


def test_speculation_is_refused_before_anything_is_written(spark, kafka_broker, tmp_path, unique_name):
    prefix, topic = unique_name("spec"), unique_name("out")
    conf = spark.sparkContext._conf
    conf.set("spark.speculation", "true")
    try:
        with pytest.raises(SpeculativeExecutionError) as excinfo:
            _write(keyed_frame(spark, "s", 10, 2), kafka_broker, tmp_path, prefix, topic, 1)
    finally:
        conf.set("spark.speculation", "false")
    assert "spark.speculation" in str(excinfo.value)
    assert "kafka-eos-txn runbook speculative-execution (" in str(excinfo.value)
    assert find_manifests(str(tmp_path), prefix) == []
    with _admin(kafka_broker) as admin:
        assert admin.list(prefixes=[prefix]) == []


def _leave_open_transaction(broker, tid, topic, keys):
    """A transaction a crashed producer left open (prepared, never committed, in no manifest)."""
    with _admin(broker) as admin:
        txn = PartitionTransaction(
            confluent_config=broker.client_config(),
            transactional_id=tid,
            topic=topic,
            transaction_timeout_ms=600_000,
            protocol=TransactionProtocol.from_admin(admin),
            describe=admin.describe,
        )
        txn.begin()
        txn.write_rows(keys, [b"stray"] * len(keys))
        assert txn.prepare() is not None


def test_probing_aborts_what_a_wider_failed_attempt_of_this_checkpoint_left(
    spark, kafka_broker, tmp_path, unique_name
):
    """PROBING (for clusters without ListTransactions): a 3-partition attempt failed; the retry has 2."""
    prefix, topic = unique_name("probe"), unique_name("out")
    with pytest.raises(Exception, match="injected failure of partition 2"):
        _write(
            keyed_frame(spark, "w", 90, 3),
            kafka_broker,
            tmp_path,
            prefix,
            topic,
            9,
            fault_plan=FaultPlan(fail_task_partition=2),
        )
    with _admin(kafka_broker) as admin:
        assert admin.describe([f"{prefix}-2-9"])[f"{prefix}-2-9"].state == TxnState.ONGOING

    manifest = _write(
        keyed_frame(spark, "w", 90, 2), kafka_broker, tmp_path, prefix, topic, 9, abort_strategy="PROBING"
    )
    assert len(manifest.committables) == 2
    commit_manifest(kafka_broker.bootstrap, manifest)
    with _admin(kafka_broker) as admin:
        assert admin.describe([f"{prefix}-2-9"])[f"{prefix}-2-9"].state != TxnState.ONGOING
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys("w", 90))


@pytest.mark.parametrize("transaction_version", [1, 2])
def test_committables_record_the_clusters_commit_protocol(
    spark, kafka_broker_factory, tmp_path, unique_name, transaction_version
):
    """TV1 and TV2 (Kafka 4) clusters: the committable says which EndTxn the commit must send."""
    broker = kafka_broker_factory(transaction_version=transaction_version)
    prefix, topic = unique_name(f"tv{transaction_version}"), unique_name("out")
    manifest = _write(keyed_frame(spark, "v", 60, 2), broker, tmp_path, prefix, topic, 1)
    assert {c.transaction_version for c in manifest.committables} == {transaction_version}
    end_txn = {c.end_txn_version for c in manifest.committables}
    assert end_txn == {5} if transaction_version == 2 else max(end_txn) <= 4
    commit_manifest(broker.bootstrap, manifest)
    assert_exactly_once(count_keys(broker.bootstrap, topic), _keys("v", 60))


def test_headers_and_partition_columns_travel_through_arrow(spark, kafka_broker, tmp_path, unique_name):
    from confluent_kafka import Consumer, TopicPartition

    prefix, topic = unique_name("hdrs"), unique_name("out")
    df = spark.createDataFrame(
        [(f"h-{i}", f"v{i}", [("trace", f"t{i}".encode())], 0) for i in range(20)],
        "key string, value string, headers array<struct<key: string, value: binary>>, part int",
    ).repartition(2)
    manifest = _write(
        df, kafka_broker, tmp_path, prefix, topic, 1, headers_col="headers", partition_col="part"
    )
    assert {p.partition for c in manifest.committables for p in c.partitions} == {0}
    commit_manifest(kafka_broker.bootstrap, manifest)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys("h", 20))
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap,
            "group.id": unique_name("g"),
            "isolation.level": "read_committed",
        }
    )
    seen = {}
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 20
        while len(seen) < 20 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen[msg.key().decode()] = msg.headers()
    finally:
        consumer.close()
    assert seen["h-7"] == [("trace", b"t7")] and len(seen) == 20


def test_the_manifest_knows_its_uri(spark, kafka_broker, tmp_path, unique_name):
    topic, prefix = unique_name("alias-topic"), unique_name("alias")
    df = keyed_frame(spark, "alias", 6, 2)
    with pytest.raises(TypeError, match="manifest_uri"):  # the store is manifest_base_uri, one name
        write_exactly_once(df, topic=topic, kafka_config=kafka_broker.client_config(),
                           transactional_id_prefix=prefix, checkpoint_id=1, manifest_uri=str(tmp_path))
    manifest = write_exactly_once(
        df,
        topic=topic,
        kafka_config=kafka_broker.client_config(),
        transactional_id_prefix=prefix,
        checkpoint_id=1,
        manifest_base_uri=str(tmp_path),
    )
    assert manifest.uri == manifest_uri(str(tmp_path), prefix, 1)
    assert commit_checkpoint_uri(kafka_broker, manifest.uri).status == "committed"
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [f"alias-{i}" for i in range(6)])


def commit_checkpoint_uri(broker, uri):
    from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint

    with TransactionAdmin(KafkaClientConfig.from_mapping(broker.client_config())) as admin:
        return commit_checkpoint(admin, uri, committed_by="test")


def test_a_checkpoint_write_lists_its_pipeline_once(spark, kafka_broker, unique_name):
    """One listing per write, restore included: the second write settles the first checkpoint (left
    PREPARED) from the listing it already has, reading back only the manifest it committed."""
    base = CountingStore.fresh_base()
    prefix, topic = unique_name("listed"), unique_name("out")
    try:
        _write(keyed_frame(spark, "l1", 20, 2), kafka_broker, base, prefix, topic, 1)  # a folder to list
        for checkpoint in (2, 3):  # each settles the one before it, left PREPARED
            CountingStore.listings.clear()
            manifest = _write(keyed_frame(spark, f"l{checkpoint}", 20, 2), kafka_broker, base, prefix, topic,
                              checkpoint)
            assert CountingStore.listed(base, prefix) == 1, (checkpoint, dict(CountingStore.listings))
            before = read_manifest(manifest_uri(base, prefix, checkpoint - 1))
            assert before.status is ManifestStatus.COMMITTED
            assert before.commit_report["committed_by"] == "restore"
        commit_manifest(kafka_broker.bootstrap, manifest)
        assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [k for t in ("l1", "l2", "l3")
                                                                         for k in _keys(t, 20)])
    finally:
        CountingStore().rm(base, recursive=True)
