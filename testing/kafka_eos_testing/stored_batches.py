"""The record batches a topic holds, read raw with a Fetch: what the broker stored, byte for byte.

Tests use it to see what a producer setting changed on the wire (the codec bits in the batch
attributes, records per batch, batch sizes, the partition of each batch), on the embedded broker
and on real Kafka alike. Kafka keeps a batch's bytes as the producer sent them while the topic's
``compression.type`` is ``producer`` (its default).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import FetchRequest
from kafka.structs import TopicPartition

from kafka_eos_testing.broker.records import BatchHeader, split_batches

__all__ = ["placed_batches", "stored_batches"]


def stored_batches(admin: Any, topic: str, partitions: int) -> list[BatchHeader]:
    """Every data batch of the topic (control batches left out); ``admin``: a TransactionAdmin."""
    return [header for _, header in placed_batches(admin, topic, partitions)]


def placed_batches(admin: Any, topic: str, partitions: int) -> list[tuple[int, BatchHeader]]:
    """Every data batch (control batches left out) of the topic, as the broker stores it (a Fetch
    from offset 0 to each partition's leader; 64 MiB per partition is more than any test writes)."""
    fetch_topic = FetchRequest.FetchTopic
    leaders = admin.wire.leaders([TopicPartition(topic, p) for p in range(partitions)])
    headers: list[tuple[int, BatchHeader]] = []
    for partition in range(partitions):
        request = FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=64 << 20, isolation_level=1, session_id=0,
            session_epoch=-1, forgotten_topics_data=[], rack_id="",
            topics=[fetch_topic(topic=topic, partitions=[fetch_topic.FetchPartition(
                partition=partition, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                partition_max_bytes=64 << 20)])],
            max_version=12,
        )
        response = admin.wire.send(request, leaders[TopicPartition(topic, partition)])
        for answer in response.responses:
            for row in answer.partitions:
                if row.error_code:
                    raise RuntimeError(f"Fetch of {topic}-{partition} answered error code {row.error_code}")
                headers += [(partition, h) for h, _ in split_batches(bytes(row.records or b""))
                            if not h.is_control]
    return headers
