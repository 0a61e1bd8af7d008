"""Cluster faults on a real 3-node Kafka 4.4 KRaft cluster, each ending with exactly-once.

The embedded broker is one node: its coordinator is every partition's leader and never moves.
Here the transaction coordinator, the partition leaders and the replicas live on different
JVMs, and a node is killed (``kill -9``) or shut down while prepared transactions wait for
their commit. Each test ends with a ``read_committed`` consumer counting every key exactly once.

Topics have replication factor 3 and ``min.insync.replicas=2`` (as ``__transaction_state``), so
one node down loses nothing that was acknowledged. Nothing is mocked: the commit is the commit
task's own code (``KafkaCommitTransactionsOperator`` / ``TransactionAdmin.commit``), the write
is ``write_exactly_once`` in a local SparkSession, and the faults are signals to real nodes.
"""

from __future__ import annotations

import threading
import time

import pytest
from cluster_helpers import (
    coordinators,
    create_topic,
    healthy,
    ids_coordinated_by_one_node,
    leaders,
    settled_count,
    transaction_admin,
)

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, read_manifest
from airflow_provider_kafka_eos.kafka.errors import KafkaEosError
from airflow_provider_kafka_eos.operators.commit import KafkaCommitTransactionsOperator
from airflow_provider_kafka_eos.spark.writer import write_exactly_once
from kafka_eos_testing.spark import keyed_frame
from kafka_eos_testing.transactions import produce_transaction, write_prepared_manifest
from kafka_eos_testing.verify import assert_exactly_once

pytestmark = [pytest.mark.kafka_cluster]

# Long enough for a rolling restart of three JVMs on a loaded 2-core machine.
TXN_TIMEOUT_MS = 600_000


def _prepare(cluster, tids, topic, tag, per_txn=50):
    """One open transaction per id, its keys spread over the topic's 3 partitions; the keys."""
    keys: list[str] = []
    for tid in tids:
        mine = [f"{tag}-{tid}-{j}" for j in range(per_txn)]
        produce_transaction(
            cluster.bootstrap, tid, topic, [k.encode() for k in mine],
            partitions=[0, 1, 2], transaction_timeout_ms=TXN_TIMEOUT_MS,
        )
        keys += mine
    return keys


def _manifest(cluster, tmp_path, pipeline, topic, tids):
    with transaction_admin(cluster) as admin:
        base = str(tmp_path / "manifests")
        return write_prepared_manifest(admin, base, pipeline, topic, tids, prefix=pipeline)


def _commit_task(conn_id, uri):
    return KafkaCommitTransactionsOperator(task_id="commit", manifest_uri=uri, kafka_eos_conn_id=conn_id)


def test_coordinator_killed_between_prepare_and_commit(cluster, tmp_path, unique_name, kafka_eos_conn):
    """kill -9 the node coordinating every transactional id of the checkpoint, then commit at once:
    the commit task meets the dead node (cached or named by FindCoordinator until the controller
    fences it) and must follow the coordinator to the node that loads its partition."""
    pipeline, topic = unique_name("coordkill"), unique_name("out")
    create_topic(cluster, topic)
    node, tids = ids_coordinated_by_one_node(cluster, pipeline, 4)
    keys = _prepare(cluster, tids, topic, "ck")
    uri = _manifest(cluster, tmp_path, pipeline, topic, tids)

    cluster.kill_node(node)
    report = _commit_task(kafka_eos_conn(cluster), uri).execute({})

    assert report["outcomes"] == {"committed": 4}
    assert read_manifest(uri).status is ManifestStatus.COMMITTED
    after = coordinators(cluster, tids)
    assert node not in after.values(), f"the dead node {node} still coordinates {after}"
    assert_exactly_once(settled_count(cluster, topic), keys)
    healthy(cluster)  # the node back: its replicas catch up; the count must not change
    assert_exactly_once(settled_count(cluster, topic), keys)


def test_partition_leader_killed_while_spark_writes(cluster, spark, tmp_path, unique_name):
    """kill -9 the leader of partition 0 while the Spark tasks produce into it: produce retries
    follow the new leader (same batch, same sequence: idempotent), the driver verifies every
    transaction on its coordinator, and the commit makes each key visible once."""
    prefix, topic = unique_name("leaderkill"), unique_name("out")
    create_topic(cluster, topic)
    victim = leaders(cluster, topic)[0]
    rows = 150_000
    df = keyed_frame(spark, "lk", rows, 3)
    result: dict[str, object] = {}

    def write() -> None:
        try:
            result["manifest"] = write_exactly_once(
                df, topic=topic, kafka_config=cluster.client_config(), transactional_id_prefix=prefix,
                checkpoint_id=1, manifest_base_uri=str(tmp_path / "manifests"),
                transaction_timeout_ms=TXN_TIMEOUT_MS,
            )
        except BaseException as exc:  # handed to the test thread
            result["error"] = exc

    writer = threading.Thread(target=write, name="spark-writer", daemon=True)
    writer.start()
    deadline = time.monotonic() + 300
    from confluent_kafka import Consumer, TopicPartition

    probe = cluster.client_config(**{"group.id": "probe", "isolation.level": "read_uncommitted"})
    consumer = Consumer(probe)
    try:
        while (written_before := consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1]) == 0:
            assert writer.is_alive(), f"the write ended before any record reached partition 0: {result}"
            assert time.monotonic() < deadline, "no record reached partition 0 within 300 s"
            time.sleep(0.05)  # polling interval of a deadline-bounded wait
    finally:
        consumer.close()
    assert writer.is_alive(), "the write finished before the leader could be killed; use more rows"
    cluster.kill_node(victim)
    writer.join(600)
    assert not writer.is_alive(), "the Spark write did not finish within 600 s of the leader's death"
    assert "error" not in result, f"the write failed after the leader died: {result.get('error')!r}"
    manifest = result["manifest"]
    assert leaders(cluster, topic)[0] != victim
    consumer = Consumer(probe)
    try:
        written_after = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
    finally:
        consumer.close()
    # Records reached partition 0 after its leader died: the write really went on through the move.
    assert written_after > written_before, (written_before, written_after)

    with transaction_admin(cluster) as admin:
        outcomes = admin.commit(manifest.committables)
    assert {o.outcome for o in outcomes} == {"committed"}
    healthy(cluster)
    assert_exactly_once(settled_count(cluster, topic), [f"lk-{i}" for i in range(rows)])


def test_rolling_restart_between_prepare_and_commit(cluster, tmp_path, unique_name, kafka_eos_conn):
    """Every node stopped (controlled shutdown) and started again in turn, each back in sync before
    the next: every coordinator and leader moves at least once; the prepared transactions
    survive in the replicated transaction log and are committed afterwards."""
    pipeline, topic = unique_name("rolling"), unique_name("out")
    create_topic(cluster, topic)
    tids = [f"{pipeline}-{i}" for i in range(6)]
    spread = set(coordinators(cluster, tids).values())
    keys = _prepare(cluster, tids, topic, "rr")
    uri = _manifest(cluster, tmp_path, pipeline, topic, tids)

    for node in cluster.nodes:
        cluster.stop_node(node.node_id)
        healthy(cluster)  # starts it again, waits for full ISR everywhere

    with transaction_admin(cluster) as admin:
        states = {d.state.value for d in admin.describe(tids).values()}
    assert states == {"Ongoing"}, f"the prepared transactions did not survive the restart: {states}"
    report = _commit_task(kafka_eos_conn(cluster), uri).execute({})
    assert report["outcomes"] == {"committed": 6}, (report, spread)
    assert_exactly_once(settled_count(cluster, topic), keys)


def test_commit_while_coordinators_move(cluster, unique_name):
    """The commit has described and verified every transaction on coordinator N; N then starts
    a controlled shutdown (its transaction-log partitions move to the other nodes) before the
    EndTxns are sent. The EndTxns meet NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS or a closed
    connection and must follow the coordinators within the commit's deadline.

    The seam: ``TransactionAdmin(clock_ms=...)``: the commit reads its clock exactly once,
    between verification and the first EndTxn; the test's clock starts the shutdown there."""
    pipeline, topic = unique_name("moving"), unique_name("out")
    create_topic(cluster, topic)
    node, tids = ids_coordinated_by_one_node(cluster, pipeline, 8)
    keys = _prepare(cluster, tids, topic, "mv", per_txn=20)
    with transaction_admin(cluster) as admin:
        committables = _committables(admin, tids)

    stopper = threading.Thread(target=cluster.stop_node, args=(node,), name="stop-coordinator", daemon=True)
    moved: list[bool] = []

    def clock_ms() -> int:
        if not stopper.is_alive() and not moved:
            stopper.start()
            moved.append(_wait_until_any_moved(cluster, tids, node))
        return int(time.time() * 1000)

    with transaction_admin(cluster, clock_ms=clock_ms) as admin:
        outcomes = admin.commit(committables)
    stopper.join(60)
    assert moved == [True], "the coordinators did not start moving off the stopping node"
    assert {o.outcome for o in outcomes} == {"committed"}, outcomes
    healthy(cluster)
    assert_exactly_once(settled_count(cluster, topic), keys)


def _committables(admin, tids):
    """The prepared transactions as the Spark driver records them (via a PREPARED manifest's shape)."""
    import tempfile

    with tempfile.TemporaryDirectory() as base:
        uri = write_prepared_manifest(admin, base, "m", "t", tids)
        return read_manifest(uri).committables


def _wait_until_any_moved(cluster, tids, node, timeout_s: float = 60) -> bool:
    """True once FindCoordinator (asked afresh) names another node for any id, or the node exited."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not cluster.node(node).running():
            return True
        try:
            found = coordinators(cluster, tids)
        except (AssertionError, KafkaEosError):  # a lookup on a cluster in motion may fail: ask again
            found = {}
        if any(n != node for n in found.values()):
            return True
        time.sleep(0.1)  # polling interval of a deadline-bounded wait
    return False
