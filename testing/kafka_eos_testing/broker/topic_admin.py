"""CreateTopics and DeleteTopics (one replica; replication factor -1 or 1 only)."""

from __future__ import annotations

from kafka.protocol.admin import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

from . import codes
from .api import RequestContext, handles
from .topics import MAX_PARTITIONS
from .versions import schema_min_version

_MESSAGES = {
    codes.TOPIC_ALREADY_EXISTS: "Topic '{}' already exists.",
    codes.INVALID_PARTITIONS: f"Number of partitions must be between 1 and {MAX_PARTITIONS} on this broker.",
    codes.INVALID_REPLICATION_FACTOR: "Replication factor must be 1 (or -1) on this single-node broker.",
    codes.TOPIC_AUTHORIZATION_FAILED: "Authorization failed.",
}


def _create_one(ctx: RequestContext, topic, validate_only: bool) -> tuple[int, int]:
    broker = ctx.broker
    if not (
        ctx.authorized("CREATE", "CLUSTER", "kafka-cluster") or ctx.authorized("CREATE", "TOPIC", topic.name)
    ):
        return codes.TOPIC_AUTHORIZATION_FAILED, -1
    partitions = broker.config.default_partitions if topic.num_partitions == -1 else topic.num_partitions
    if topic.assignments:
        partitions = len(topic.assignments)
    if topic.replication_factor not in (-1, 1) and not topic.assignments:
        return codes.INVALID_REPLICATION_FACTOR, partitions
    if broker.topics.validate_name(topic.name):
        return codes.INVALID_TOPIC_EXCEPTION, partitions
    if broker.topics.exists(topic.name):
        return codes.TOPIC_ALREADY_EXISTS, partitions
    if not 1 <= partitions <= MAX_PARTITIONS:
        return codes.INVALID_PARTITIONS, partitions
    if validate_only:
        return codes.NONE, partitions
    return broker.topics.create(topic.name, partitions), partitions


@handles(
    CreateTopicsRequest,
    CreateTopicsResponse,
    min_version=schema_min_version(CreateTopicsRequest),
    max_version=7,
)
def create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    results = []
    for topic in request.topics:
        error, partitions = _create_one(ctx, topic, bool(request.validate_only))
        if error == codes.INVALID_TOPIC_EXCEPTION:
            message = ctx.broker.topics.validate_name(topic.name)
        else:
            message = _MESSAGES.get(error, "").format(topic.name) or None
        results.append(
            CreateTopicsResponse.CreatableTopicResult(
                name=topic.name,
                topic_id=ctx.broker.topics.topic_id(topic.name),
                error_code=error,
                error_message=message,
                num_partitions=partitions if error == codes.NONE else -1,
                replication_factor=1 if error == codes.NONE else -1,
                configs=[],
            )
        )
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


@handles(
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    min_version=schema_min_version(DeleteTopicsRequest),
    max_version=6,
)
def delete_topics(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    broker = ctx.broker
    if ctx.api_version >= 6:
        wanted = [
            (t.name if t.name is not None else broker.topics.name_for_id(t.topic_id), t.topic_id)
            for t in request.topics
        ]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        if name is None:
            error = codes.UNKNOWN_TOPIC_ID
        elif not ctx.authorized("DELETE", "TOPIC", name):
            error = codes.TOPIC_AUTHORIZATION_FAILED
        else:
            tid = broker.topics.topic_id(name)
            error = broker.topics.delete(name)
            topic_id = topic_id or tid
        results.append(
            DeleteTopicsResponse.DeletableTopicResult(
                name=name, topic_id=topic_id, error_code=error, error_message=None
            )
        )
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
