"""ACLs over the wire: a broker with an ACL file (SASL/PLAIN), real clients as alice and as a super user.

Covers the ACL checks of the transaction APIs (WRITE / TWO_PHASE_COMMIT on TransactionalId,
DESCRIBE filtering of List/DescribeTransactions, ALTER on Cluster for WriteTxnMarkers) and the
CreateAcls / DescribeAcls / DeleteAcls APIs through kafka-python's admin client.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaException
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import ClusterAuthorizationFailedError, SecurityDisabledError
from kafka.protocol.admin.acl import CreateAclsRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest, WriteTxnMarkersRequest

from kafka_eos_testing.broker.txn_state import Err
from kafka_eos_testing.broker.txn_testkit import (
    WireProbe,
    admin,
    describe_settled,
    keys,
    produce_in_transaction,
    transactional_producer,
)
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.broker, pytest.mark.broker_double]

USERS = {"alice": "alice-pw", "admin": "admin-pw", "bob": "bob-pw"}


def sasl(user: str) -> dict:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def kafka_python_admin(bootstrap: str, user: str):
    return admin(
        bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username=user,
        sasl_plain_password=USERS[user],
    )


@pytest.fixture
def secured(kafka_broker_factory, tmp_path, unique_name):
    """A broker with users alice and admin (super user); alice may only write and read her topic."""
    topic, prefix = unique_name("secure"), unique_name("eos")
    acl_file = tmp_path / "acls.json"
    acl_file.write_text(
        json.dumps(
            {
                "users": USERS,
                "super_users": ["User:admin"],
                "acls": [
                    {"principal": "User:alice", "resource_type": "TOPIC", "name": topic, "operation": "ALL"},
                    {"principal": "User:alice", "resource_type": "GROUP", "name": "*", "operation": "READ"},
                ],
            }
        )
    )
    broker = kafka_broker_factory(acl_file=str(acl_file), two_phase_commit=True)
    return broker, topic, prefix


def test_transactional_producer_needs_write_on_its_transactional_id(secured):
    broker, topic, prefix = secured
    tid = f"{prefix}-0"
    with pytest.raises(KafkaException, match=r"(?i)transactional.?id.*authori"):
        transactional_producer(broker.bootstrap, tid, **sasl("alice"))

    client = kafka_python_admin(broker.bootstrap, "admin")
    try:
        pattern = ResourcePattern(
            ResourceType.TRANSACTIONAL_ID, f"{prefix}-", ACLResourcePatternType.PREFIXED
        )
        result = client.create_acls(
            [ACL("User:alice", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW, pattern)]
        )
        assert result["failed"] == []
    finally:
        client.close()
    producer = transactional_producer(broker.bootstrap, tid, **sasl("alice"))
    produce_in_transaction(producer, topic, keys("a", 50))
    producer.commit_transaction(30)
    assert_exactly_once(
        count_keys({"bootstrap.servers": broker.bootstrap, **sasl("admin")}, topic), keys("a", 50)
    )


def init_2pc(bootstrap: str, tid: str, user: str) -> int:
    with WireProbe(bootstrap, sasl_plain=(user, USERS[user])) as probe:
        return probe.send(
            InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000, enable2_pc=True),
            version=6,
        ).error_code


def test_two_phase_init_needs_the_two_phase_commit_acl(secured):
    broker, _, prefix = secured
    tid = f"{prefix}-2pc"
    creation = CreateAclsRequest.AclCreation

    def grant(operation: int) -> None:
        with WireProbe(broker.bootstrap, sasl_plain=("admin", USERS["admin"])) as probe:
            response = probe.send(
                CreateAclsRequest(
                    creations=[
                        creation(
                            resource_type=5,  # TRANSACTIONAL_ID
                            resource_name=tid,
                            resource_pattern_type=3,  # LITERAL
                            principal="User:alice",
                            host="*",
                            operation=operation,
                            permission_type=3,  # ALLOW
                        )
                    ]
                ),
                version=3,
            )
        assert [r.error_code for r in response.results] == [0]

    assert init_2pc(broker.bootstrap, tid, "alice") == Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    grant(4)  # WRITE alone is not enough for Enable2Pc ...
    assert init_2pc(broker.bootstrap, tid, "alice") == Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    grant(15)  # ... TWO_PHASE_COMMIT (KIP-939) is needed as well
    assert init_2pc(broker.bootstrap, tid, "alice") == Err.NONE


def test_list_and_describe_show_only_what_the_caller_may_describe(secured):
    broker, topic, prefix = secured
    mine, theirs = f"{prefix}-mine", f"{prefix}-theirs"
    for tid in (mine, theirs):
        producer = transactional_producer(broker.bootstrap, tid, **sasl("admin"))
        produce_in_transaction(producer, topic, keys(tid, 3))
        producer.commit_transaction(30)
        del producer
    client = kafka_python_admin(broker.bootstrap, "admin")
    try:
        pattern = ResourcePattern(ResourceType.TRANSACTIONAL_ID, mine, ACLResourcePatternType.LITERAL)
        client.create_acls([ACL("User:alice", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW, pattern)])
        as_admin = {t.transactional_id for rows in client.list_transactions().values() for t in rows}
    finally:
        client.close()
    assert {mine, theirs} <= as_admin
    alice = kafka_python_admin(broker.bootstrap, "alice")
    try:
        as_alice = {t.transactional_id for rows in alice.list_transactions().values() for t in rows}
        assert as_alice == {mine}
        # describable by alice; settled first (Kafka writes the commit markers after EndTxn)
        assert describe_settled(alice, mine).state.value == "CompleteCommit"
        from kafka.errors import TransactionalIdAuthorizationFailedError

        with pytest.raises(TransactionalIdAuthorizationFailedError):
            alice.describe_transactions([theirs])
    finally:
        alice.close()


def test_acl_apis_create_describe_delete(secured):
    broker, topic, _ = secured
    client = kafka_python_admin(broker.bootstrap, "admin")
    try:
        everything = ACLFilter(
            principal=None,
            host=None,
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
        )
        acls, error = client.describe_acls(everything)
        assert error.errno == 0
        assert {(a.resource_pattern.resource_type, a.resource_pattern.resource_name) for a in acls} == {
            (ResourceType.TOPIC, topic),
            (ResourceType.GROUP, "*"),
        }
        deny = ACL(
            "User:alice",
            "*",
            ACLOperation.WRITE,
            ACLPermissionType.DENY,
            ResourcePattern(ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL),
        )
        assert client.create_acls([deny])["failed"] == []
        only_denies = ACLFilter(
            principal="User:alice",
            host=None,
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.DENY,
            resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, topic, ACLResourcePatternType.MATCH),
        )
        acls, _ = client.describe_acls(only_denies)
        assert [(a.operation, a.permission_type) for a in acls] == [
            (ACLOperation.WRITE, ACLPermissionType.DENY)
        ]
        [(_, deleted, error)] = client.delete_acls([only_denies])
        assert error.errno == 0 and len(deleted) == 1
        assert client.describe_acls(only_denies)[0] == []
    finally:
        client.close()
    alice = kafka_python_admin(broker.bootstrap, "alice")
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            alice.describe_acls(everything)
    finally:
        alice.close()


def test_acl_apis_without_an_authorizer_are_security_disabled(kafka_broker):
    client = admin(kafka_broker.bootstrap)
    try:
        everything = ACLFilter(
            principal=None,
            host=None,
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
        )
        with pytest.raises(SecurityDisabledError):
            client.describe_acls(everything)
    finally:
        client.close()


def test_write_txn_markers_needs_alter_on_the_cluster(secured):
    broker, topic, _ = secured
    marker_cls = WriteTxnMarkersRequest.WritableTxnMarker
    request = WriteTxnMarkersRequest(
        markers=[
            marker_cls(
                producer_id=1,
                producer_epoch=0,
                transaction_result=False,
                topics=[marker_cls.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])],
                coordinator_epoch=-1,
            )
        ]
    )
    with WireProbe(broker.bootstrap, sasl_plain=("alice", USERS["alice"])) as probe:
        response = probe.send(request, version=1)
    assert response.markers[0].topics[0].partitions[0].error_code == Err.CLUSTER_AUTHORIZATION_FAILED


def test_idempotent_init_needs_idempotent_write_or_write_on_some_topic(secured):
    """A null transactional id: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic (KafkaApis)."""
    broker, _, _ = secured

    def init_idempotent(user: str):
        with WireProbe(broker.bootstrap, sasl_plain=(user, USERS[user])) as probe:
            return probe.send(
                InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=0), version=4
            )

    assert init_idempotent("bob").error_code == Err.CLUSTER_AUTHORIZATION_FAILED  # no ACL at all
    alice = init_idempotent("alice")  # ALL on her topic implies WRITE on some topic
    assert (alice.error_code, alice.producer_epoch) == (0, 0) and alice.producer_id >= 0
