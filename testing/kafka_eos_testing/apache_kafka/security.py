"""ACLs of a SASL cluster: the embedded broker's ACL file, created in real Kafka with CreateAcls.

The file's entries are validated by the embedded broker's own parser (one owner of the format)
and sent as raw CreateAcls requests, because no Python client knows KIP-939's TWO_PHASE_COMMIT
operation yet. StandardAuthorizer applies ACLs from the metadata log asynchronously, so this
waits until every node's DescribeAcls shows them all before the cluster counts as ready.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from kafka.protocol.admin.acl import CreateAclsRequest, DescribeAclsRequest

from kafka_eos_testing.broker.acl import (
    OPERATIONS,
    PATTERN_TYPES,
    PERMISSIONS,
    RESOURCE_TYPES,
    acl_from_mapping,
)
from kafka_eos_testing.broker.txn_testkit import WireProbe

from .errors import KafkaStartError


class Cluster(Protocol):
    """What applying ACLs uses of the cluster that hands itself in (an ``ApacheKafkaCluster``):
    a Protocol, so this module does not import the cluster that calls it."""

    nodes: list[Any]
    options: Any
    _internal_user: Any


def apply_acls(cluster: Cluster, entries: list[dict[str, Any]], deadline: float) -> None:
    if not entries:
        return
    bindings = [acl_from_mapping(entry).validate() for entry in entries]
    creation = CreateAclsRequest.AclCreation
    creations = [
        creation(
            resource_type=RESOURCE_TYPES[b.resource_type],
            resource_name=b.name,
            resource_pattern_type=PATTERN_TYPES[b.pattern_type],
            principal=b.principal,
            host=b.host,
            operation=OPERATIONS[b.operation],
            permission_type=PERMISSIONS[b.permission],
        )
        for b in bindings
    ]
    user = cluster._internal_user
    with WireProbe(cluster.nodes[0].probe_address, sasl_plain=user) as probe:
        response = probe.send(CreateAclsRequest(creations=creations), version=3)
    failed = [(b, r.error_message) for b, r in zip(bindings, response.results, strict=True) if r.error_code]
    if failed:
        raise KafkaStartError(f"Kafka refused ACLs of {cluster.options.acl_file}: {failed}")
    describe = DescribeAclsRequest(
        resource_type_filter=1,
        resource_name_filter=None,
        pattern_type_filter=1,
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    for node in cluster.nodes:
        while True:
            with WireProbe(node.probe_address, sasl_plain=user) as probe:
                found = probe.send(describe, version=2)
            count = sum(len(resource.acls) for resource in found.resources)
            if count >= len(bindings):
                break
            if time.monotonic() > deadline:
                raise KafkaStartError(
                    f"node {node.node_id} shows {count} of {len(bindings)} ACLs after the deadline"
                )
            time.sleep(0.1)
