"""The embedded broker's authorizer follows Kafka's StandardAuthorizer rules (table-driven).

Pure logic: no sockets. The ACL APIs and the authorization of transactional requests are
exercised over the wire in test_acl_wire.py.
"""

from __future__ import annotations

import json

import pytest

from kafka_eos_testing.broker.acl import (
    AclBinding,
    AclFilter,
    AclValidationError,
    Authorizer,
)

ALICE = "User:alice"


def acl(
    name,
    operation,
    permission="ALLOW",
    *,
    resource_type="TRANSACTIONAL_ID",
    pattern="LITERAL",
    principal=ALICE,
):
    return AclBinding(principal, resource_type, pattern, name, operation, permission)


@pytest.mark.parametrize(
    ("acls", "operation", "name", "expected"),
    [
        ([], "WRITE", "eos-1", False),  # no ACL -> deny
        ([acl("eos-1", "WRITE")], "WRITE", "eos-1", True),
        ([acl("eos-1", "WRITE")], "WRITE", "eos-2", False),
        ([acl("eos-", "WRITE", pattern="PREFIXED")], "WRITE", "eos-7", True),
        ([acl("eos-", "WRITE", pattern="PREFIXED")], "WRITE", "other", False),
        ([acl("*", "WRITE")], "WRITE", "anything", True),  # literal wildcard name
        ([acl("eos-1", "WRITE")], "DESCRIBE", "eos-1", True),  # WRITE implies DESCRIBE
        ([acl("eos-1", "READ")], "DESCRIBE", "eos-1", True),
        ([acl("eos-1", "DELETE")], "DESCRIBE", "eos-1", True),
        ([acl("eos-1", "ALTER")], "DESCRIBE", "eos-1", True),
        ([acl("eos-1", "DESCRIBE")], "WRITE", "eos-1", False),  # ...but not the other way round
        ([acl("eos-1", "WRITE")], "TWO_PHASE_COMMIT", "eos-1", False),  # 2PC needs its own ACL
        ([acl("eos-1", "TWO_PHASE_COMMIT")], "TWO_PHASE_COMMIT", "eos-1", True),
        ([acl("eos-1", "ALL")], "TWO_PHASE_COMMIT", "eos-1", True),
        ([acl("eos-", "ALL", pattern="PREFIXED"), acl("eos-1", "WRITE", "DENY")], "WRITE", "eos-1", False),
        ([acl("eos-", "ALL", pattern="PREFIXED"), acl("eos-1", "WRITE", "DENY")], "DESCRIBE", "eos-1", True),
        ([acl("eos-1", "WRITE"), acl("eos-1", "ALL", "DENY")], "DESCRIBE", "eos-1", False),
        ([acl("eos-1", "WRITE", principal="User:*")], "WRITE", "eos-1", True),
        ([acl("eos-1", "WRITE", principal="User:bob")], "WRITE", "eos-1", False),
        ([acl("eos-1", "WRITE", resource_type="TOPIC")], "WRITE", "eos-1", False),  # other resource type
    ],
)
def test_authorize_rules(acls, operation, name, expected):
    assert Authorizer(acls).authorize(ALICE, operation, "TRANSACTIONAL_ID", name) is expected


def test_super_users_may_do_anything():
    authorizer = Authorizer([acl("*", "ALL", "DENY", principal="User:*")], super_users=["User:admin"])
    assert authorizer.authorize("User:admin", "ALTER", "CLUSTER", "kafka-cluster")
    assert not authorizer.authorize(ALICE, "DESCRIBE", "TRANSACTIONAL_ID", "x")


@pytest.mark.parametrize(
    ("acls", "expected"),
    [
        ([], False),
        ([acl("t", "WRITE", resource_type="TOPIC")], True),
        ([acl("t", "WRITE", resource_type="TOPIC"), acl("*", "WRITE", "DENY", resource_type="TOPIC")], False),
        ([acl("t", "WRITE", resource_type="TOPIC"), acl("t", "WRITE", "DENY", resource_type="TOPIC")], False),
        (
            [
                acl("t", "WRITE", resource_type="TOPIC", pattern="PREFIXED"),
                acl("u", "WRITE", "DENY", resource_type="TOPIC", pattern="PREFIXED"),
            ],
            True,
        ),
    ],
)
def test_authorize_by_resource_type(acls, expected):
    assert Authorizer(acls).authorize_by_resource_type(ALICE, "WRITE", "TOPIC") is expected


def test_from_file_reads_users_super_users_and_acls(tmp_path):
    path = tmp_path / "acls.json"
    path.write_text(
        json.dumps(
            {
                "users": {"alice": "pw"},
                "super_users": ["User:admin"],
                "acls": [
                    {
                        "principal": ALICE,
                        "resource_type": "TRANSACTIONAL_ID",
                        "pattern_type": "PREFIXED",
                        "name": "eos-",
                        "operation": "WRITE",
                        "permission": "ALLOW",
                        "host": "*",
                    }
                ],
            }
        )
    )
    authorizer = Authorizer.from_file(path)
    assert authorizer.users == {"alice": "pw"}
    assert authorizer.authorize(ALICE, "WRITE", "TRANSACTIONAL_ID", "eos-9")
    assert authorizer.authorize("User:admin", "WRITE", "TRANSACTIONAL_ID", "x")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"principal": ALICE, "resource_type": "TOPIC", "name": "t", "operation": "FLY"},
            "invalid operation",
        ),
        (
            {"principal": "alice", "resource_type": "TOPIC", "name": "t", "operation": "READ"},
            "invalid principal",
        ),
        (
            {"principal": ALICE, "resource_type": "CLUSTER", "name": "c", "operation": "ALTER"},
            "kafka-cluster",
        ),
        (
            {
                "principal": ALICE,
                "resource_type": "TOPIC",
                "name": "t",
                "operation": "READ",
                "pattern_type": "MATCH",
            },
            "invalid pattern type",
        ),
        ({"principal": ALICE, "resource_type": "TOPIC", "operation": "READ"}, "'name'"),
    ],
)
def test_from_file_names_the_bad_entry(tmp_path, entry, message):
    path = tmp_path / "acls.json"
    path.write_text(json.dumps({"acls": [entry]}))
    with pytest.raises(AclValidationError, match=r"acls\[0\]") as info:
        Authorizer.from_file(path)
    assert message in str(info.value)


def test_filters_match_as_kafka():
    literal = acl("eos-1", "WRITE")
    prefixed = acl("eos-", "WRITE", pattern="PREFIXED")
    wildcard = acl("*", "READ")
    topic = acl("eos-1", "WRITE", resource_type="TOPIC")
    authorizer = Authorizer([literal, prefixed, wildcard, topic])
    assert authorizer.describe(AclFilter()) == [literal, prefixed, wildcard, topic]
    assert authorizer.describe(
        AclFilter(resource_type="TRANSACTIONAL_ID", pattern_type="MATCH", name="eos-1")
    ) == [
        literal,
        prefixed,
        wildcard,
    ]
    assert authorizer.describe(AclFilter(pattern_type="ANY", name="eos-1")) == [literal, topic]
    assert authorizer.describe(AclFilter(pattern_type="PREFIXED")) == [prefixed]
    assert authorizer.describe(AclFilter(operation="READ")) == [wildcard]
    assert authorizer.remove(AclFilter(resource_type="TOPIC")) == [topic]
    assert authorizer.describe(AclFilter()) == [literal, prefixed, wildcard]
    assert not authorizer.authorize(ALICE, "WRITE", "TOPIC", "eos-1")
