"""Helpers of the cluster fault tests: health, topics, coordinators and leaders on 3 nodes.

Every wait polls with a deadline (no sleeps as synchronisation); every lookup is a plain
protocol read (Metadata, FindCoordinator) with no side effect on the transactions under test.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig

HEALTH_TIMEOUT_S = 180.0


def admin_client(cluster: Any) -> AdminClient:
    return AdminClient(cluster.client_config(**{"log_level": 2}))


def transaction_admin(cluster: Any, **kwargs: Any) -> TransactionAdmin:
    """A TransactionAdmin as the commit task builds one (its default deadlines and retries)."""
    return TransactionAdmin(KafkaClientConfig.from_mapping(cluster.client_config()), **kwargs)


def _poll(what: str, check: Any, timeout_s: float, cluster: Any) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while True:
        try:
            result = check()
        except KafkaException as exc:
            result, last = None, exc
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s:.0f} s (last: {last}); logs:\n"
                                 f"{cluster.log_tail(10)}")
        time.sleep(0.25)  # polling interval of a deadline-bounded wait


def healthy(cluster: Any, timeout_s: float = HEALTH_TIMEOUT_S) -> None:
    """Start any stopped node, then wait until every node is in Metadata and every partition
    (internal topics included) has a leader and its full replica set in sync."""
    for node in cluster.nodes:
        if not node.running():
            cluster.start_node(node.node_id)
    client = admin_client(cluster)
    wanted = {n.node_id for n in cluster.nodes}

    def check() -> bool:
        metadata = client.list_topics(timeout=5)
        if set(metadata.brokers) != wanted:
            return False
        for topic in metadata.topics.values():
            for part in topic.partitions.values():
                if part.leader < 0 or set(part.isrs) != set(part.replicas):
                    return False
        return True

    _poll("a fully replicated cluster", check, timeout_s, cluster)


def create_topic(cluster: Any, topic: str, partitions: int = 3) -> None:
    """Replication factor 3, min.insync.replicas 2 (acks=all survives one dead node)."""
    client = admin_client(cluster)
    new = NewTopic(topic, num_partitions=partitions, replication_factor=3,
                   config={"min.insync.replicas": "2"})
    client.create_topics([new])[topic].result(timeout=60)

    def ready() -> bool:
        parts = client.list_topics(topic, timeout=5).topics[topic].partitions
        return len(parts) == partitions and all(p.leader >= 0 and len(p.isrs) == 3 for p in parts.values())

    _poll(f"topic {topic} with {partitions} led, fully replicated partitions", ready, 60, cluster)


def leaders(cluster: Any, topic: str) -> dict[int, int]:
    """Partition -> leader node id."""
    parts = admin_client(cluster).list_topics(topic, timeout=10).topics[topic].partitions
    return {p: meta.leader for p, meta in parts.items()}


def coordinators(cluster: Any, transactional_ids: list[str]) -> dict[str, int]:
    """Transaction coordinator node of each id (FindCoordinator: a lookup, it creates nothing)."""
    with transaction_admin(cluster) as admin:
        found = admin.wire.coordinators(transactional_ids)
    bad = {t: n for t, n in found.items() if not isinstance(n, int)}
    assert not bad, f"FindCoordinator failed: {bad}"
    return found


def group_coordinators(cluster: Any, groups: list[str], timeout_s: float = 60) -> dict[str, int]:
    """Group coordinator node of each consumer group (FindCoordinator key type 0: a lookup; the
    group is not created). Polled while the cluster answers COORDINATOR_NOT_AVAILABLE: the first
    group lookup of a cluster creates ``__consumer_offsets``."""
    from kafka.protocol.metadata import FindCoordinatorRequest

    with transaction_admin(cluster) as admin:
        def check() -> dict[str, int] | None:
            request = FindCoordinatorRequest(key_type=0, coordinator_keys=list(groups), min_version=4)
            (response,) = admin.wire.send_all([(request, None)])
            rows = {row.key: row for row in response.coordinators}
            if any(row.error_code for row in rows.values()):
                return None
            return {key: row.node_id for key, row in rows.items()}

        return _poll(f"the group coordinators of {groups}", check, timeout_s, cluster)


def ids_coordinated_by_one_node(cluster: Any, prefix: str, count: int) -> tuple[int, list[str]]:
    """``count`` transactional ids ``<prefix>-<i>`` that share one coordinator node, and that node."""
    candidates = [f"{prefix}-{i}" for i in range(12 * count)]
    by_node: dict[int, list[str]] = {}
    for tid, node in coordinators(cluster, candidates).items():
        by_node.setdefault(node, []).append(tid)
    node, tids = max(by_node.items(), key=lambda item: len(item[1]))
    assert len(tids) >= count, f"only {len(tids)} of {len(candidates)} ids share node {node}"
    return node, sorted(tids, key=candidates.index)[:count]


def settled_count(cluster: Any, topic: str, timeout_s: float = 120) -> Any:
    """``count_keys`` (read_committed) once every partition's last stable offset has reached its
    high watermark: no transaction left open on the topic and every marker written.

    Real Kafka answers EndTxn(commit) once PrepareCommit is in the transaction log and writes
    the markers to the partition leaders afterwards (asynchronously, and later still when a
    leader just moved): a consumer that reads right after the commit may stop at an LSO that
    is about to move. The embedded broker writes markers before it answers, so it never shows
    this window. Waiting for LSO == high watermark (with a deadline) is still a real check: a
    lost record leaves the count short, a duplicate makes it long.
    """
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as Tp

    from kafka_eos_testing.verify import count_keys

    consumers = {
        isolation: Consumer(cluster.client_config(**{"group.id": "settle", "isolation.level": isolation}))
        for isolation in ("read_committed", "read_uncommitted")
    }
    try:
        partitions = list(consumers["read_committed"].list_topics(topic, timeout=10).topics[topic].partitions)

        def settled() -> bool:
            for p in partitions:
                stable = consumers["read_committed"].get_watermark_offsets(Tp(topic, p), timeout=5)[1]
                high = consumers["read_uncommitted"].get_watermark_offsets(Tp(topic, p), timeout=5)[1]
                if stable != high:
                    return False
            return True

        _poll(f"every partition of {topic} stable (LSO = high watermark)", settled, timeout_s, cluster)
    finally:
        for consumer in consumers.values():
            consumer.close()
    return count_keys(cluster.bootstrap, topic, timeout_s=timeout_s)
