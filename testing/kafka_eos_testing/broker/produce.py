"""Produce: record batches appended as bytes, with Kafka's idempotence and transaction checks."""

from __future__ import annotations

from kafka.protocol.producer import ProduceRequest, ProduceResponse

from . import codes
from .api import RequestContext, handles
from .records import BatchHeader
from .versions import schema_min_version

_PartitionResponse = ProduceResponse.TopicProduceResponse.PartitionProduceResponse


def _transactional_check(ctx: RequestContext, transactional_id: str | None, topic: str, partition: int):
    """The coordinator's veto for transactional batches (None when there is no coordinator).

    As ReplicaManager does, a request below Produce v12 (no TV2 implicit add) skips the veto when
    ``transaction.partition.verification.enable`` is off: its batch is appended although the
    coordinator never added the partition (KIP-664's hanging transaction).
    """
    coordinator = ctx.broker.coordinator
    unverified = ctx.api_version < 12 and not getattr(
        ctx.broker.config, "transaction_partition_verification", True
    )

    def check(header: BatchHeader) -> int:
        if transactional_id is None:
            return codes.INVALID_REQUEST  # transactional batch in a request without a transactional id
        if coordinator is None or unverified:
            return codes.NONE
        return coordinator.verify_produce(
            transactional_id, header.producer_id, header.producer_epoch, topic, partition
        )

    return check


@handles(ProduceRequest, ProduceResponse, min_version=schema_min_version(ProduceRequest), max_version=12)
def produce(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    broker = ctx.broker
    transactional_id = request.transactional_id
    txn_denied = transactional_id is not None and not ctx.authorized(
        "WRITE", "TRANSACTIONAL_ID", transactional_id
    )
    acks_invalid = request.acks not in (-1, 0, 1)
    responses = []
    for topic_data in request.topic_data:
        name = topic_data.name
        topic_denied = not ctx.authorized("WRITE", "TOPIC", name)
        partition_responses = []
        for data in topic_data.partition_data:
            error, base, message = codes.NONE, -1, None
            log = broker.topics.get(name, data.index)
            if acks_invalid:
                error = codes.INVALID_REQUIRED_ACKS
            elif txn_denied:
                error = codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            elif topic_denied:
                error = codes.TOPIC_AUTHORIZATION_FAILED
            elif log is None:
                error = codes.UNKNOWN_TOPIC_OR_PARTITION
            elif data.records is None:
                error, message = codes.CORRUPT_MESSAGE, "null records"
            else:
                result = log.append_records(
                    data.records,
                    transactional_ok=_transactional_check(ctx, transactional_id, name, data.index),
                )
                error, base, message = result.error_code, result.base_offset, result.error_message
            partition_responses.append(
                _PartitionResponse(
                    index=data.index,
                    error_code=error,
                    base_offset=base,
                    log_append_time_ms=-1,
                    log_start_offset=log.log_start_offset if log is not None else -1,
                    record_errors=[],
                    error_message=message,
                )
            )
        responses.append(
            ProduceResponse.TopicProduceResponse(name=name, partition_responses=partition_responses)
        )
    if request.acks == 0:
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)
