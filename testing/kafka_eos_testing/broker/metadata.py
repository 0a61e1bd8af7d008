"""Metadata and FindCoordinator: one node leads every partition and coordinates everything."""

from __future__ import annotations

import uuid

from kafka.protocol.metadata import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)

from . import codes
from .api import RequestContext, handles
from .versions import schema_min_version

LEADER_EPOCH = 0  # one leader forever; batches are stamped with this epoch on append
_NULL_UUID = uuid.UUID(int=0)
# AclOperation codes a TOPIC supports (Kafka's AclEntry.supportedOperations(TOPIC)).
_TOPIC_OPERATIONS = {
    "READ": 3,
    "WRITE": 4,
    "CREATE": 5,
    "DELETE": 6,
    "ALTER": 7,
    "DESCRIBE": 8,
    "DESCRIBE_CONFIGS": 10,
    "ALTER_CONFIGS": 11,
}


def _topic_authorized_operations(ctx: RequestContext, name: str) -> set[int]:
    """KIP-430: the topic operations the caller may perform (every one without an authorizer)."""
    return {code for op, code in _TOPIC_OPERATIONS.items() if ctx.authorized(op, "TOPIC", name)}


def _topic_entry(
    ctx: RequestContext, name: str, error: int = codes.NONE, *, include_operations: bool = False
) -> MetadataResponse.MetadataResponseTopic:
    broker = ctx.broker
    node = broker.node_id
    partitions = (
        [
            MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
                error_code=codes.NONE,
                partition_index=log.partition,
                leader_id=node,
                leader_epoch=LEADER_EPOCH,
                replica_nodes=[node],
                isr_nodes=[node],
                offline_replicas=[],
            )
            for log in broker.topics.partitions(name)
        ]
        if error == codes.NONE
        else []
    )
    return MetadataResponse.MetadataResponseTopic(
        error_code=error,
        name=name,
        topic_id=broker.topics.topic_id(name) if error == codes.NONE else _NULL_UUID,
        is_internal=False,
        partitions=partitions,
        # Kafka fills it for every listed topic the caller may describe (None = omitted)
        authorized_operations=(
            _topic_authorized_operations(ctx, name)
            if include_operations and error != codes.TOPIC_AUTHORIZATION_FAILED
            else None
        ),
    )


@handles(MetadataRequest, MetadataResponse, min_version=schema_min_version(MetadataRequest), max_version=12)
def metadata(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    topics = []
    with_ops = ctx.api_version >= 8 and bool(getattr(request, "include_topic_authorized_operations", False))
    if request.topics is None or (ctx.api_version == 0 and not request.topics):  # v0: empty = all
        topics = [
            _topic_entry(ctx, name, include_operations=with_ops)
            for name in broker.topics.names()
            if ctx.authorized("DESCRIBE", "TOPIC", name)
        ]
    else:
        for wanted in request.topics:
            name = wanted.name
            if name is None and ctx.api_version >= 10:
                name = broker.topics.name_for_id(wanted.topic_id)
                if name is None:
                    topics.append(
                        MetadataResponse.MetadataResponseTopic(
                            error_code=codes.UNKNOWN_TOPIC_ID,
                            name=None,
                            topic_id=wanted.topic_id,
                            partitions=[],
                        )
                    )
                    continue
            if not ctx.authorized("DESCRIBE", "TOPIC", name):
                topics.append(_topic_entry(ctx, name, codes.TOPIC_AUTHORIZATION_FAILED))
                continue
            if not broker.topics.exists(name):
                invalid = broker.topics.validate_name(name)
                allow = request.allow_auto_topic_creation if ctx.api_version >= 4 else True
                if invalid:
                    error = codes.INVALID_TOPIC_EXCEPTION
                    topics.append(_topic_entry(ctx, name, error, include_operations=with_ops))
                    continue
                creatable = allow and (
                    ctx.authorized("CREATE", "CLUSTER", "kafka-cluster")
                    or ctx.authorized("CREATE", "TOPIC", name)
                )
                if not (creatable and broker.ensure_topic(name)):
                    topics.append(
                        _topic_entry(ctx, name, codes.UNKNOWN_TOPIC_OR_PARTITION, include_operations=with_ops)
                    )
                    continue
            topics.append(_topic_entry(ctx, name, include_operations=with_ops))
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[
            MetadataResponse.MetadataResponseBroker(
                node_id=broker.node_id, host=broker.host, port=broker.port, rack=None
            )
        ],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
        error_code=codes.NONE,
    )


_KEY_TYPE_RESOURCE = {0: "GROUP", 1: "TRANSACTIONAL_ID"}


def _coordinator_error(ctx: RequestContext, key: str, key_type: int) -> int:
    resource = _KEY_TYPE_RESOURCE.get(key_type)
    if resource is None:
        return codes.INVALID_REQUEST
    if not ctx.authorized("DESCRIBE", resource, key):
        return (
            codes.GROUP_AUTHORIZATION_FAILED if key_type == 0 else codes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
    return codes.NONE


@handles(FindCoordinatorRequest, FindCoordinatorResponse, max_version=6)
def find_coordinator(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    broker = ctx.broker
    key_type = request.key_type if ctx.api_version >= 1 else 0
    if ctx.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error = _coordinator_error(ctx, key, key_type)
            ok = error == codes.NONE
            coordinators.append(
                FindCoordinatorResponse.Coordinator(
                    key=key,
                    node_id=broker.node_id if ok else -1,
                    host=broker.host if ok else "",
                    port=broker.port if ok else -1,
                    error_code=error,
                    error_message=None,
                )
            )
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    error = _coordinator_error(ctx, request.key, key_type)
    ok = error == codes.NONE
    return FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=error,
        error_message=None,
        node_id=broker.node_id if ok else -1,
        host=broker.host if ok else "",
        port=broker.port if ok else -1,
    )
