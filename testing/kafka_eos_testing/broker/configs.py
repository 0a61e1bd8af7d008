"""DescribeConfigs (the broker settings clients and preflight read) and DescribeCluster."""

from __future__ import annotations

from kafka.protocol.admin import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)

from . import codes
from .api import RequestContext, handles
from .versions import schema_min_version

TOPIC = 2
BROKER = 4
_STATIC_BROKER_CONFIG = 4  # ConfigSource.STATIC_BROKER_CONFIG
_DEFAULT_CONFIG = 5
_Result = DescribeConfigsResponse.DescribeConfigsResult
_Entry = _Result.DescribeConfigsResourceResult


def broker_configs(broker) -> dict[str, str]:
    config = broker.config
    return {
        "transaction.max.timeout.ms": str(config.transaction_max_timeout_ms),
        "transactional.id.expiration.ms": str(config.transactional_id_expiration_ms),
        "transaction.two.phase.commit.enable": str(config.two_phase_commit).lower(),
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": str(config.abort_check_interval_ms),
        "unstable.api.versions.enable": str(config.two_phase_commit).lower(),
        "num.partitions": str(config.default_partitions),
        "auto.create.topics.enable": str(config.auto_create_topics).lower(),
        "authorizer.class.name": "kafka_eos_testing.broker.acl.Authorizer"
        if broker.authorizer is not None
        else "",
        "broker.id": str(broker.node_id),
        "node.id": str(broker.node_id),
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "min.insync.replicas": "1",
        "log.dirs": config.data_dir or "",
    }


def topic_configs(broker, topic: str) -> dict[str, str]:
    return {
        "cleanup.policy": "delete",
        "min.insync.replicas": "1",
        "retention.ms": "-1",
        "max.message.bytes": "104857600",
        "message.timestamp.type": "CreateTime",
    }


def _entries(values: dict[str, str], keys, source: int) -> list:
    wanted = values if keys is None else {k: values[k] for k in keys if k in values}
    return [
        _Entry(
            name=name,
            value=value,
            read_only=True,
            config_source=source,
            is_default=False,
            is_sensitive=False,
            synonyms=[],
            config_type=0,
            documentation=None,
        )
        for name, value in wanted.items()
    ]


@handles(
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    min_version=schema_min_version(DescribeConfigsRequest),
    max_version=4,
)
def describe_configs(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    broker = ctx.broker
    results = []
    for resource in request.resources:
        kind, name, keys = resource.resource_type, resource.resource_name, resource.configuration_keys
        error, message, entries = codes.NONE, None, []
        if kind == BROKER:
            if name not in ("", str(broker.node_id)):
                error, message = codes.INVALID_REQUEST, f"unknown broker {name!r}"
            elif not ctx.authorized("DESCRIBE_CONFIGS", "CLUSTER", "kafka-cluster"):
                error, message = codes.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
            else:
                entries = _entries(broker_configs(broker), keys, _STATIC_BROKER_CONFIG)
        elif kind == TOPIC:
            if not ctx.authorized("DESCRIBE_CONFIGS", "TOPIC", name):
                error, message = codes.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
            elif not broker.topics.exists(name):
                error, message = codes.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist."
            else:
                entries = _entries(topic_configs(broker, name), keys, _DEFAULT_CONFIG)
        else:
            error, message = codes.INVALID_REQUEST, f"resource type {kind} is not supported by this broker"
        results.append(
            _Result(
                error_code=error,
                error_message=message,
                resource_type=kind,
                resource_name=name,
                configs=entries,
            )
        )
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


@handles(DescribeClusterRequest, DescribeClusterResponse, max_version=1)
def describe_cluster(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.broker
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=codes.NONE,
        error_message=None,
        endpoint_type=1,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        brokers=[
            DescribeClusterResponse.DescribeClusterBroker(
                broker_id=broker.node_id, host=broker.host, port=broker.port, rack=None
            )
        ],
    )
