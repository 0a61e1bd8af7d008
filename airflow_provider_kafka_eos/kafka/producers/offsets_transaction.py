"""The offsets transaction: the consumer group's offsets, prepared with the checkpoint's output.

A Kafka-input checkpoint moves its consumer group to the ranges' ``to`` offsets in a transaction
of its own (AddOffsetsToTxn + TxnOffsetCommit for the group), prepared in the driver after the
output's transactions and left open like them. Its committable is listed in the manifest with
the output's, so the one commit step commits both and a give-up aborts both
(``kafka/checkpoints/lifecycle.py`` needs nothing new): the group's offsets become visible
exactly when the output does. Standard lag tools then read the pipeline's progress from the group.

The requests are librdkafka's (``send_offsets_to_transaction``: a well-kept client, the same one
the output's producer uses); the group metadata comes from a consumer that never joins the group
(generation -1, no member: the group is only a name for the offsets, nothing consumes with it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import KafkaEosError, ProducerFencedError
from airflow_provider_kafka_eos.kafka.producers.librdkafka import (
    PartitionTransaction,
    description_field,
    translate_error,
    verified_committable,
)
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable

__all__ = ["OFFSETS_TOPIC", "OffsetsTransaction"]

log = logging.getLogger(__name__)
OFFSETS_TOPIC = "__consumer_offsets"


class OffsetsTransaction(PartitionTransaction):
    """One open transaction holding ``group``'s new offsets; ``prepare()`` returns its committable.

    ``topic`` is an input topic (the connection check before ``init_transactions`` asks for its
    metadata); the committable names the ``__consumer_offsets`` partition the coordinator added.
    """

    def __init__(self, *, group: str, consumer_factory: Callable[[dict[str, Any]], Any] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.group = group
        self._consumer_config = dict(kwargs["confluent_config"])
        self._consumer_factory = consumer_factory

    def send_offsets(self, offsets: Mapping[tuple[str, int], int], timeout_s: float = 60.0) -> None:
        """Add the group's offsets (partition -> next offset to read) to the open transaction."""
        from confluent_kafka import TopicPartition as ConfluentPartition

        if not offsets:
            raise KafkaEosError("an offsets transaction needs at least one partition's offset",
                                transactional_id=self.transactional_id)
        consumer = self._group_consumer()
        try:
            metadata = consumer.consumer_group_metadata()
        finally:
            consumer.close()  # never subscribed: closing leaves no member and commits nothing
        parts = [ConfluentPartition(t, p, int(o)) for (t, p), o in sorted(offsets.items())]
        try:
            self._require_producer().send_offsets_to_transaction(parts, metadata, timeout_s)
        except Exception as exc:
            raise translate_error(exc, self.transactional_id, "send_offsets_to_transaction") from None
        self._produced = len(parts)

    def prepare(self) -> Committable | None:
        """Verify on the coordinator that the offsets are in our open transaction; release the producer."""
        try:
            if self._produced == 0:
                return None
            self.identity()
            description = self._describe([self.transactional_id])[self.transactional_id]
            offsets_partitions = {
                tp.partition if hasattr(tp, "partition") else tp[1]
                for tp in description_field(description, "partitions")
                if (tp.topic if hasattr(tp, "topic") else tp[0]) == OFFSETS_TOPIC
            }
            if not offsets_partitions:
                raise ProducerFencedError(
                    f"the coordinator's transaction holds no {OFFSETS_TOPIC} partition after the offsets of "
                    f"group {self.group!r} were sent: another attempt took over the id or it was aborted",
                    transactional_id=self.transactional_id, runbook="speculative-execution")
            return verified_committable(
                describe=self._describe, transactional_id=self.transactional_id, topic=OFFSETS_TOPIC,
                producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                written_partitions=offsets_partitions, record_count=self._produced, protocol=self.protocol)
        finally:
            self.release()

    def _group_consumer(self) -> Any:
        settings = {k: v for k, v in self._consumer_config.items() if not k.startswith(("transaction",
                                                                                         "enable.idempotence"))}
        settings.update({"group.id": self.group, "enable.auto.commit": False})
        if self._consumer_factory is not None:
            return self._consumer_factory(settings)
        from confluent_kafka import Consumer

        return Consumer(settings)


def prepare_group_offsets(*, offsets: Mapping[tuple[str, int], int], group: str, **kwargs: Any,
                          ) -> Committable | None:
    """Open, fill and prepare one offsets transaction; None when there is nothing to move."""
    if not offsets:
        return None
    txn = OffsetsTransaction(group=group, **kwargs)
    txn.begin()
    try:
        txn.send_offsets(offsets)
    except BaseException:
        txn.release()
        raise
    committable = txn.prepare()
    log.info("offsets of group %s prepared in %s: %d partition(s)", group, txn.transactional_id, len(offsets))
    return committable
