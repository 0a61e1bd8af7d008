"""LSO stall probe: is a lingering transaction holding ``read_committed`` consumers back?

A ``read_committed`` consumer reads up to the last stable offset (LSO), the first offset of
the oldest open transaction on the partition. One forgotten transaction therefore stalls
every such consumer of that partition, however much committed data follows it. Per
partition we compare ListOffsets LATEST under both isolation levels (``read_committed`` =
LSO, ``read_uncommitted`` = high watermark) and name the producers with an open transaction
(DescribeProducers: producer id, epoch, current transaction start offset); when the cluster
has ListTransactions we map the producer ids to transactional ids, so the operator knows
exactly what to abort.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin.transactions import DescribeProducersRequest, ListTransactionsRequest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.structs import TopicPartition as KafkaTopicPartition

from airflow_provider_kafka_eos.kafka.errors import KafkaEosError, UnsupportedCapabilityError
from airflow_provider_kafka_eos.kafka.protocol.committable import TopicPartition
from airflow_provider_kafka_eos.kafka.protocol.error_codes import error_name
from airflow_provider_kafka_eos.kafka.protocol.wire import WireOwner

__all__ = ["LsoStatus", "OpenTransaction", "lso_probe"]

LATEST = -1
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass(frozen=True)
class OpenTransaction:
    """A producer with an open transaction on a partition."""

    producer_id: int
    producer_epoch: int
    txn_start_offset: int
    last_timestamp_ms: int
    transactional_id: str | None  # None when ListTransactions cannot map the producer id
    holds_lso: bool  # its transaction starts at the LSO: it is what pins read_committed consumers
    # the epoch of the coordinator that last wrote a marker for it (an admin abort must not be older)
    coordinator_epoch: int = -1

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class LsoStatus:
    topic: str
    partition: int
    last_stable_offset: int
    high_watermark: int
    open_transactions: tuple[OpenTransaction, ...] = ()

    @property
    def stalled(self) -> bool:
        """Records exist past the LSO that read_committed consumers cannot read yet."""
        return self.last_stable_offset < self.high_watermark

    @property
    def behind(self) -> int:
        return max(0, self.high_watermark - self.last_stable_offset)

    @property
    def blocking(self) -> OpenTransaction | None:
        return next((t for t in self.open_transactions if t.holds_lso), None)

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "last_stable_offset": self.last_stable_offset,
            "high_watermark": self.high_watermark,
            "stalled": self.stalled,
            "behind": self.behind,
            "open_transactions": [t.to_dict() for t in self.open_transactions],
        }


def lso_probe(
    admin: WireOwner, topic_partitions: Iterable[TopicPartition | tuple[str, int]]
) -> list[LsoStatus]:
    """LSO, high watermark and open transactions of each partition (sorted by topic, partition).

    ``admin`` is an open :class:`~airflow_provider_kafka_eos.kafka.admin.transactions.TransactionAdmin`.
    Needs ListOffsets v2+ (isolation levels) and DescribeProducers (Kafka 2.8+); without
    ListTransactions the transactional ids stay None.
    """
    wire = admin.wire
    parts = sorted({p if isinstance(p, TopicPartition) else TopicPartition(*p) for p in topic_partitions})
    if not parts:
        return []
    if (wire.api_version(ListOffsetsRequest) or 0) < 2:
        raise UnsupportedCapabilityError(
            "the LSO probe needs ListOffsets v2+ (isolation levels, Kafka 0.11+)"
        )
    if wire.api_version(DescribeProducersRequest) is None:
        raise UnsupportedCapabilityError("the LSO probe needs DescribeProducers (Kafka 2.8+)")
    try:
        leaders = wire.leaders([KafkaTopicPartition(p.topic, p.partition) for p in parts])
    except Exception as exc:
        if type(exc).__name__ == "UnknownTopicOrPartitionError":
            raise KafkaEosError(
                f"the LSO probe was given an unknown topic or partition ({exc})",
                runbook="consumers-stuck-at-lso",
            ) from None
        raise
    by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
    for p in parts:
        by_leader[leaders[KafkaTopicPartition(p.topic, p.partition)]].append(p)

    batch: list[tuple[Any, int]] = []
    for node, tps in by_leader.items():
        batch.append((_list_offsets(tps, READ_COMMITTED), node))
        batch.append((_list_offsets(tps, READ_UNCOMMITTED), node))
        batch.append((_describe_producers(tps), node))
    responses = wire.send_all(batch)

    lso: dict[TopicPartition, int] = {}
    hw: dict[TopicPartition, int] = {}
    producers: dict[TopicPartition, list[Any]] = {}
    for index, response in enumerate(responses):
        kind = index % 3
        if kind in (0, 1):
            target = lso if kind == 0 else hw
            for topic in response.topics:
                for row in topic.partitions:
                    _check(row.error_code, "ListOffsets", topic.name, row.partition_index)
                    target[TopicPartition(topic.name, row.partition_index)] = row.offset
        else:
            for topic in response.topics:
                for row in topic.partitions:
                    _check(row.error_code, "DescribeProducers", topic.name, row.partition_index)
                    producers[TopicPartition(topic.name, row.partition_index)] = [
                        p for p in row.active_producers if p.current_txn_start_offset >= 0
                    ]
    open_pids = sorted({p.producer_id for rows in producers.values() for p in rows})
    names = _transactional_ids(admin, open_pids)
    statuses = []
    for p in parts:
        stable = lso[p]
        opened = tuple(
            OpenTransaction(
                producer_id=row.producer_id,
                producer_epoch=row.producer_epoch,
                txn_start_offset=row.current_txn_start_offset,
                last_timestamp_ms=row.last_timestamp,
                transactional_id=names.get(row.producer_id),
                holds_lso=row.current_txn_start_offset == stable,
                coordinator_epoch=row.coordinator_epoch,
            )
            for row in sorted(producers.get(p, []), key=lambda r: r.current_txn_start_offset)
        )
        statuses.append(LsoStatus(p.topic, p.partition, stable, hw[p], opened))
    return statuses


def _list_offsets(tps: Sequence[TopicPartition], isolation: int) -> Any:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for p in tps:
        by_topic[p.topic].append(p.partition)
    topics = [
        ListOffsetsRequest.ListOffsetsTopic(
            name=topic,
            partitions=[
                ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=i, timestamp=LATEST, current_leader_epoch=-1
                )
                for i in sorted(indexes)
            ],
        )
        for topic, indexes in sorted(by_topic.items())
    ]
    return ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=topics, min_version=2)


def _describe_producers(tps: Sequence[TopicPartition]) -> Any:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for p in tps:
        by_topic[p.topic].append(p.partition)
    return DescribeProducersRequest(
        topics=[
            DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=sorted(indexes))
            for topic, indexes in sorted(by_topic.items())
        ]
    )


def _transactional_ids(admin: WireOwner, producer_ids: Sequence[int]) -> dict[int, str]:
    """Producer id -> transactional id via ListTransactions(ProducerIdFilters); {} when unsupported."""
    wire = admin.wire
    if not producer_ids or wire.api_version(ListTransactionsRequest) is None:
        return {}
    batch = [
        (ListTransactionsRequest(state_filters=[], producer_id_filters=list(producer_ids)), node)
        for node in wire.brokers()
    ]
    names: dict[int, str] = {}
    for response in wire.send_all(batch):
        if response.error_code:
            continue  # e.g. no DESCRIBE on any id: the probe still reports producer ids
        for row in response.transaction_states:
            if row.producer_id in producer_ids:
                names[row.producer_id] = row.transactional_id
    return names


def _check(code: int, api: str, topic: str, partition: int) -> None:
    if code:
        raise KafkaEosError(
            f"{api} failed for {topic}-{partition} with {error_name(code)}", runbook="consumers-stuck-at-lso"
        )
