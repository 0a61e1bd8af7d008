"""ListOffsets (EARLIEST / LATEST per isolation level / by timestamp) and OffsetForLeaderEpoch."""

from __future__ import annotations

from kafka.protocol.consumer import (
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

from . import codes
from .api import RequestContext, handles
from .metadata import LEADER_EPOCH
from .versions import schema_min_version

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
READ_COMMITTED = 1

_Topic = ListOffsetsResponse.ListOffsetsTopicResponse
_Partition = _Topic.ListOffsetsPartitionResponse


def _lookup(log, timestamp: int, isolation: int) -> tuple[int, int]:
    """(offset, timestamp) as Kafka answers; LATEST honours the isolation level (LSO vs HW)."""
    if timestamp == LATEST:
        return (log.last_stable_offset if isolation == READ_COMMITTED else log.high_watermark), -1
    if timestamp == EARLIEST:
        return log.log_start_offset, -1
    if timestamp == MAX_TIMESTAMP:
        return log.max_timestamp()
    offset, found = log.offset_for_timestamp(timestamp)
    if isolation == READ_COMMITTED and offset >= log.last_stable_offset:
        return -1, -1
    return offset, found


@handles(
    ListOffsetsRequest, ListOffsetsResponse, min_version=schema_min_version(ListOffsetsRequest), max_version=8
)
def list_offsets(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    isolation = request.isolation_level if ctx.api_version >= 2 else 0
    topics = []
    for topic in request.topics:
        allowed = ctx.authorized("DESCRIBE", "TOPIC", topic.name)
        partitions = []
        for part in topic.partitions:
            log = ctx.broker.topics.get(topic.name, part.partition_index)
            if not allowed:
                error, offset, ts = codes.TOPIC_AUTHORIZATION_FAILED, -1, -1
            elif log is None:
                error, offset, ts = codes.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
            else:
                error = codes.NONE
                offset, ts = _lookup(log, part.timestamp, isolation)
            partitions.append(
                _Partition(
                    partition_index=part.partition_index,
                    error_code=error,
                    timestamp=ts,
                    offset=offset,
                    leader_epoch=LEADER_EPOCH if error == codes.NONE else -1,
                )
            )
        topics.append(_Topic(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


_EpochTopic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
_EpochEnd = _EpochTopic.EpochEndOffset


@handles(
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    min_version=schema_min_version(OffsetForLeaderEpochRequest),
    max_version=4,
)
def offset_for_leader_epoch(ctx: RequestContext, request: OffsetForLeaderEpochRequest):
    """One leader epoch ever (0): its end offset is the log end, so clients never truncate."""
    topics = []
    for topic in request.topics:
        allowed = ctx.authorized("DESCRIBE", "TOPIC", topic.topic)
        partitions = []
        for part in topic.partitions:
            log = ctx.broker.topics.get(topic.topic, part.partition)
            if not allowed:
                partitions.append(
                    _EpochEnd(error_code=codes.TOPIC_AUTHORIZATION_FAILED, partition=part.partition)
                )
            elif log is None:
                partitions.append(
                    _EpochEnd(error_code=codes.UNKNOWN_TOPIC_OR_PARTITION, partition=part.partition)
                )
            else:
                partitions.append(
                    _EpochEnd(
                        error_code=codes.NONE,
                        partition=part.partition,
                        leader_epoch=LEADER_EPOCH,
                        end_offset=log.high_watermark,
                    )
                )
        topics.append(_EpochTopic(topic=topic.topic, partitions=partitions))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
