"""Authorization and authentication failures are clear errors that change nothing, and the SASL
password never reaches the logs. Uses a dedicated embedded broker with SASL/PLAIN and ACLs."""

from __future__ import annotations

import json
import logging

import pytest
from ops_support import keys_for, open_transaction, unique

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import AuthorizationError
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker

PREFIX = "aclpipe"


@pytest.fixture
def acl_broker(kafka_broker_factory, tmp_path):
    acl_file = tmp_path / "acls.json"
    acl_file.write_text(
        json.dumps(
            {
                "users": {"admin": "admin-pw", "viewer": "viewer-pw-123", "stranger": "stranger-pw"},
                "super_users": ["User:admin"],
                "acls": [
                    {
                        "principal": "User:viewer",
                        "resource_type": "TRANSACTIONAL_ID",
                        "pattern_type": "PREFIXED",
                        "name": PREFIX,
                        "operation": "DESCRIBE",
                    },
                    {
                        "principal": "User:viewer",
                        "resource_type": "TOPIC",
                        "pattern_type": "PREFIXED",
                        "name": PREFIX,
                        "operation": "READ",
                    },
                ],
            }
        )
    )
    return kafka_broker_factory(acl_file=str(acl_file))


def test_missing_write_acl_is_named_and_changes_nothing(acl_broker):
    admin_cfg = acl_broker.sasl_config("admin", "admin-pw")
    topic = f"{PREFIX}-{unique('t')}"
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient(admin_cfg)
    client.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)
    tid = f"{PREFIX}-0-1"
    with TransactionAdmin(KafkaClientConfig.from_mapping(admin_cfg)) as super_admin:
        committable = open_transaction(admin_cfg, super_admin, tid, topic, keys_for(tid, 3))
        before = super_admin.describe([tid])

        with TransactionAdmin(
            KafkaClientConfig.from_mapping(acl_broker.sasl_config("viewer", "viewer-pw-123"))
        ) as viewer:
            assert viewer.describe([tid])[tid].state == "Ongoing"  # DESCRIBE is granted
            with pytest.raises(AuthorizationError) as commit_err:
                viewer.commit([committable])
            with pytest.raises(AuthorizationError) as abort_err:
                viewer.abort([tid])
        for err in (commit_err.value, abort_err.value):
            assert f"WRITE on TransactionalId:{tid}" in str(err) and "missing-acl.md" in str(err)
        assert super_admin.describe([tid]) == before  # still Ongoing, same epoch

        with (
            TransactionAdmin(
                KafkaClientConfig.from_mapping(acl_broker.sasl_config("stranger", "stranger-pw"))
            ) as nobody,
            pytest.raises(AuthorizationError, match="DESCRIBE on TransactionalId"),
        ):
            nobody.describe([tid])

        super_admin.commit([committable])
    assert_exactly_once(count_keys(admin_cfg, topic), keys_for(tid, 3))


def test_wrong_password_is_an_authentication_error_and_secrets_stay_out_of_logs(acl_broker, caplog):
    caplog.set_level(logging.DEBUG)
    # kafka-python's own logger too: a test before this one in the session may have quieted it
    # (log_levels.quiet_client_loggers, as the CLI and the job do), and the check needs its DEBUG records
    caplog.set_level(logging.DEBUG, logger="kafka")
    wrong = KafkaClientConfig.from_mapping(acl_broker.sasl_config("viewer", "not-the-pw-456"))
    with pytest.raises(AuthorizationError) as info:
        TransactionAdmin(wrong, connect_timeout_ms=3000)
    assert "authentication" in str(info.value).lower()
    right = KafkaClientConfig.from_mapping(acl_broker.sasl_config("viewer", "viewer-pw-123"))
    with TransactionAdmin(right) as admin:
        admin.list(prefixes=[PREFIX])
    assert "Starting KafkaAdminClient" in caplog.text  # the record we redact was emitted
    for secret in ("not-the-pw-456", "viewer-pw-123"):
        assert secret not in caplog.text
        assert secret not in str(info.value)
