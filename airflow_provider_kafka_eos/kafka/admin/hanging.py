"""Hanging transactions: open on a partition, unknown to their transaction coordinator (KIP-664).

A partition keeps a transaction open until a marker ends it. Normally the coordinator writes
that marker (commit, abort, or the abort of a timeout); a transaction it has no entry for (lost
state, a coordinator bug, a producer id reused after ``transactional.id.expiration.ms``) is never
ended and pins every ``read_committed`` consumer of the partition at its last stable offset.
Neither fencing nor EndTxn reaches it, because both go through the coordinator. KIP-664 lets an
admin write the ABORT marker on the partition itself (WriteTxnMarkers, as
``kafka-transactions.sh abort`` does); kafka-python's ``abort_transaction`` sends it, so no JVM
tool is needed.

This module owns what "hanging" means here (:func:`open_transactions` marks each open
transaction of a partition with what its coordinator says about the producer) and the marker
write (:func:`abort_on_partition`). Whether an abort is *allowed* (a PREPARED manifest listing
the producer forbids it) is decided by the caller, ``kafka/operations/resolve_hanging.py``, which
reads the manifest store first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin.transactions import ListTransactionsRequest

from airflow_provider_kafka_eos.kafka.admin.lso import lso_probe
from airflow_provider_kafka_eos.kafka.errors import AuthorizationError, KafkaEosError
from airflow_provider_kafka_eos.kafka.protocol.committable import TopicPartition
from airflow_provider_kafka_eos.kafka.protocol.wire import WireOwner

__all__ = [
    "OPEN_STATES",
    "PartitionOpenTransaction",
    "abort_on_partition",
    "open_transactions",
    "topic_partitions",
]

# Coordinator states in which the coordinator itself will still end the transaction.
OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
RUNBOOK = "consumers-stuck-at-lso"


@dataclass(frozen=True)
class PartitionOpenTransaction:
    """One producer's open transaction on one partition, and what its coordinator knows of it.

    ``coordinator_state`` is the state of the coordinator's entry for the producer id (None: no
    entry, which is what makes it hanging); ``transactional_id`` is that entry's id.
    """

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    txn_start_offset: int
    last_timestamp_ms: int
    holds_lso: bool
    transactional_id: str | None
    coordinator_state: str | None
    coordinator_epoch: int = -1

    @property
    def hanging(self) -> bool:
        """No coordinator entry will ever end it: only a marker written on the partition can."""
        return self.coordinator_state not in OPEN_STATES

    def to_row(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "txn_start_offset": self.txn_start_offset,
            "holds_lso": self.holds_lso,
            "transactional_id": self.transactional_id or "",
            "coordinator_state": self.coordinator_state or "(no entry)",
            "hanging": self.hanging,
        }


def open_transactions(
    admin: WireOwner, topic_partitions: Iterable[TopicPartition | tuple[str, int]]
) -> list[PartitionOpenTransaction]:
    """Every open transaction on the partitions (DescribeProducers through the LSO probe), each with
    its coordinator's entry for the producer id (ListTransactions filtered by producer id, every
    broker). ``admin`` is an open ``TransactionAdmin``."""
    statuses = lso_probe(admin, topic_partitions)
    pids = sorted({t.producer_id for s in statuses for t in s.open_transactions})
    entries = _coordinator_entries(admin, pids)
    return [
        PartitionOpenTransaction(
            topic=s.topic,
            partition=s.partition,
            producer_id=t.producer_id,
            producer_epoch=t.producer_epoch,
            txn_start_offset=t.txn_start_offset,
            last_timestamp_ms=t.last_timestamp_ms,
            holds_lso=t.holds_lso,
            transactional_id=entries.get(t.producer_id, (None, None))[0],
            coordinator_state=entries.get(t.producer_id, (None, None))[1],
            coordinator_epoch=t.coordinator_epoch,
        )
        for s in statuses
        for t in s.open_transactions
    ]


def topic_partitions(admin: WireOwner, topics: Sequence[str]) -> list[tuple[str, int]]:
    """Every partition of ``topics`` (kafka-python's ``describe_topics``: one Metadata request,
    bounded by the admin's request timeout); an unknown topic is an error naming it."""
    from kafka.errors import for_code

    found: list[tuple[str, int]] = []
    for topic in admin.wire.admin.describe_topics(list(topics)):
        if topic.get("error_code"):
            raise KafkaEosError(
                f"topic {topic.get('name')!r}: {for_code(topic['error_code']).__name__} (does it exist, "
                "and may this principal DESCRIBE it?)",
                runbook=RUNBOOK,
            )
        found += [(topic["name"], p["partition_index"]) for p in topic.get("partitions") or []]
    return sorted(found)


def _coordinator_entries(admin: WireOwner, producer_ids: Sequence[int]) -> dict[int, tuple[str, str]]:
    """Producer id -> (transactional id, state) from every broker's ListTransactions."""
    wire = admin.wire
    if not producer_ids:
        return {}
    if wire.api_version(ListTransactionsRequest) is None:
        raise KafkaEosError(
            "telling a hanging transaction from one its coordinator still owns needs ListTransactions "
            "(Kafka 3.0+), which this cluster lacks",
            runbook=RUNBOOK,
        )
    batch = [
        (ListTransactionsRequest(state_filters=[], producer_id_filters=list(producer_ids)), node)
        for node in wire.brokers()
    ]
    entries: dict[int, tuple[str, str]] = {}
    for response in wire.send_all(batch):
        if response.error_code:
            raise KafkaEosError(
                f"ListTransactions failed with error code {response.error_code}: without it a hanging "
                "transaction cannot be told from one its coordinator owns (the principal needs DESCRIBE "
                "on the transactional ids)",
                runbook="missing-acl",
            )
        for row in response.transaction_states:
            if row.producer_id in producer_ids:
                entries[row.producer_id] = (row.transactional_id, row.transaction_state)
    return entries


def abort_on_partition(admin: WireOwner, txn: PartitionOpenTransaction) -> None:
    """Write an ABORT marker for ``txn``'s producer id / epoch on its partition (KIP-664), with the
    coordinator epoch DescribeProducers reported for it.

    The partition leader refuses a producer id or epoch that does not match its state; the error
    names the partition and the producer and says what to check.
    """
    from kafka import errors as kerr

    topic, partition = txn.topic, txn.partition
    producer_id, producer_epoch = txn.producer_id, txn.producer_epoch

    what = f"{topic}-{partition} (producer id {producer_id}, epoch {producer_epoch})"
    try:
        admin.wire.abort_transaction(topic, partition, producer_id, producer_epoch, txn.coordinator_epoch)
    except kerr.BrokerResponseError as exc:
        name = type(exc).__name__.removesuffix("Error")
        if isinstance(exc, (kerr.ClusterAuthorizationFailedError, kerr.TopicAuthorizationFailedError)):
            raise AuthorizationError(
                f"the admin abort of {what} was refused ({name}): WriteTxnMarkers needs ALTER on the "
                "Cluster resource (Kafka's rule for KIP-664 aborts)",
                runbook="missing-acl",
            ) from None
        raise KafkaEosError(
            f"the partition leader refused the admin abort of {what} with {name}; check the producer id "
            "and epoch with `kafka-eos-txn find-hanging --topic " + topic + "`",
            runbook=RUNBOOK,
        ) from None
