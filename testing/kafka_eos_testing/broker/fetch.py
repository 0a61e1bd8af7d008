"""Fetch: both isolation levels, aborted-transaction index, long-poll woken by appends."""

from __future__ import annotations

import asyncio
import time

from kafka.protocol.consumer import FetchRequest, FetchResponse

from . import codes
from .api import RequestContext, handles
from .versions import schema_min_version

READ_COMMITTED = 1
_PartitionData = FetchResponse.FetchableTopicResponse.PartitionData
_Aborted = _PartitionData.AbortedTransaction


def _partition_error(partition: int, error_code: int):
    """A partition answer that carries only an error (no offsets, no records)."""
    return _PartitionData(
        partition_index=partition,
        error_code=error_code,
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=b"",
    )


def _read_partition(ctx: RequestContext, name: str, part, isolation: int, budget: int, first: bool):
    """(PartitionData, bytes returned, log or None) for one requested partition."""
    log = ctx.broker.topics.get(name, part.partition)
    if not ctx.authorized("READ", "TOPIC", name):
        return _partition_error(part.partition, codes.TOPIC_AUTHORIZATION_FAILED), 0, None
    if log is None:
        return _partition_error(part.partition, codes.UNKNOWN_TOPIC_OR_PARTITION), 0, None
    hw, lso = log.high_watermark, log.last_stable_offset
    offset = part.fetch_offset
    common = {
        "partition_index": part.partition,
        "high_watermark": hw,
        "last_stable_offset": lso,
        "log_start_offset": log.log_start_offset,
        "preferred_read_replica": -1,
    }
    if not log.log_start_offset <= offset <= hw:
        return (
            _PartitionData(
                error_code=codes.OFFSET_OUT_OF_RANGE, aborted_transactions=None, records=b"", **common
            ),
            0,
            log,
        )
    upper = lso if isolation == READ_COMMITTED else hw
    # The first partition with data may exceed the limits by one batch (KIP-74); others stay within.
    limit = min(part.partition_max_bytes, budget)
    batches = log.read(offset, limit, upper) if first or limit > 0 else []
    records = b"".join(batches)
    aborted = None
    if isolation == READ_COMMITTED:
        aborted = (
            [
                _Aborted(producer_id=a.producer_id, first_offset=a.first_offset)
                for a in log.aborted_transactions(offset, upper)
            ]
            if records
            else []
        )
    return (
        _PartitionData(error_code=codes.NONE, aborted_transactions=aborted, records=records, **common),
        len(records),
        log,
    )


def _build(ctx: RequestContext, request: FetchRequest):
    isolation = request.isolation_level
    budget = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    total = 0
    logs = []
    topics = []
    first = True
    errors = False
    for topic in request.topics:
        partitions = []
        for part in topic.partitions:
            data, size, log = _read_partition(ctx, topic.topic, part, isolation, budget - total, first)
            if size:
                first = False
            total += size
            errors = errors or data.error_code != codes.NONE
            if log is not None:
                logs.append(log)
            partitions.append(data)
        topics.append(FetchResponse.FetchableTopicResponse(topic=topic.topic, partitions=partitions))
    response = FetchResponse(throttle_time_ms=0, error_code=codes.NONE, session_id=0, responses=topics)
    return response, total, logs, errors


@handles(FetchRequest, FetchResponse, min_version=schema_min_version(FetchRequest), max_version=12)
async def fetch(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    deadline = time.monotonic() + max(0, request.max_wait_ms) / 1000.0
    min_bytes = max(1, request.min_bytes)
    while True:
        response, total, logs, errors = _build(ctx, request)
        remaining = deadline - time.monotonic()
        if total >= min_bytes or errors or remaining <= 0 or not logs:
            return response
        waiters = [log.waiter() for log in logs]
        try:
            await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
