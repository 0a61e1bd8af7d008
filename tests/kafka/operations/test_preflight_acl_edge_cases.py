"""ACL checks that know when ACL rules are not the whole truth, and listings that say when Kafka
hides transactions from the principal (issue #13). Embedded broker with SASL/PLAIN and ACLs.

Before the fix: a principal in ``super.users`` failed the preflight (every ACL "missing": the
check read ACL rules only), the CLI preflight had no ``--two-phase-commit`` (TWO_PHASE_COMMIT
was never checked), and ``list`` / ``find-hanging`` as a principal without DESCRIBE printed
"0 transaction(s)" with exit 0 while a transaction was open.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from eos_preflight_helpers import sasl_config

from airflow_provider_kafka_eos.kafka.operations.preflight import RetrySchedule, run_preflight
from kafka_eos_testing.transactions import produce_transaction

pytestmark = pytest.mark.broker

CLI = str(Path(sys.executable).with_name("kafka-eos-txn"))
SCHEDULE = RetrySchedule.of(retries=1, retry_delay=30, execution_timeout=60)


def _acl(principal, rtype, name, op, pattern="LITERAL"):
    return {"principal": f"User:{principal}", "resource_type": rtype, "name": name, "operation": op,
            "pattern_type": pattern}


@pytest.fixture
def secured(kafka_broker_factory, unique_name, tmp_path):
    """``root`` is a super user with no ACL at all; ``no2pc`` has every ACL but TWO_PHASE_COMMIT
    (and may read ACLs); ``blind`` may only write the topic; ``viewer`` may DESCRIBE the prefix
    and READ the topic."""
    prefix, topic = unique_name("edge") + "-", unique_name("edge-topic")
    acls = [
        _acl("no2pc", "TRANSACTIONAL_ID", prefix, "WRITE", "PREFIXED"),
        _acl("no2pc", "TOPIC", topic, "WRITE"),
        _acl("no2pc", "TOPIC", topic, "READ"),
        _acl("no2pc", "CLUSTER", "kafka-cluster", "DESCRIBE"),
        _acl("no2pc", "CLUSTER", "kafka-cluster", "DESCRIBE_CONFIGS"),
        _acl("blind", "TOPIC", topic, "WRITE"),
        _acl("viewer", "TRANSACTIONAL_ID", prefix, "DESCRIBE", "PREFIXED"),
        _acl("viewer", "TOPIC", topic, "READ"),  # find-hanging's LSO probe reads the topic
    ]
    users = ("root", "no2pc", "blind", "viewer")
    path = tmp_path / "acls.json"
    path.write_text(json.dumps({
        "users": {u: f"{u}-secret-pw" for u in users}, "super_users": ["User:root"], "acls": acls,
    }))
    broker = kafka_broker_factory(acl_file=str(path), two_phase_commit=True)
    return broker, prefix, topic


def _properties(tmp_path, broker, user) -> str:
    props = tmp_path / f"{user}.properties"
    props.write_text(
        f"bootstrap.servers={broker.bootstrap}\nsecurity.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism=PLAIN\nsasl.username={user}\nsasl.password={user}-secret-pw\n"
    )
    return str(props)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args, "--timeout", "30s"], capture_output=True, text=True, timeout=120)


def test_super_user_without_acls_passes_preflight_and_is_named_as_such(secured):
    broker, prefix, topic = secured
    report = run_preflight(
        sasl_config(broker.bootstrap, "root"), transactional_id_prefix=prefix, topics=[topic],
        transaction_timeout_ms=900_000, job_duration_budget_s=300, commit_schedule=SCHEDULE,
        two_phase_commit=True, raise_on_failure=False,
    )
    assert report.ok, report.render()
    assert report.acls["method"] == "describe-acls"
    statuses = {(f["operation"], f["resource_type"]): f for f in report.acls["findings"]}
    for key in [("WRITE", "TRANSACTIONAL_ID"), ("DESCRIBE", "TRANSACTIONAL_ID"), ("WRITE", "TOPIC"),
                ("READ", "TOPIC")]:
        assert statuses[key]["status"] == "ok" and "super user" in statuses[key]["detail"], statuses[key]
    # TWO_PHASE_COMMIT cannot be probed without creating an id: unknown (a warning), never a FAIL
    assert statuses[("TWO_PHASE_COMMIT", "TRANSACTIONAL_ID")]["status"] == "unknown"
    assert next(c for c in report.checks if c.name == "2PC ACL").status == "warn"


def test_rules_that_tell_the_whole_truth_still_fail_a_missing_2pc_acl(secured, tmp_path):
    """no2pc's rules are confirmed by the probes, so its missing TWO_PHASE_COMMIT stays a FAIL."""
    broker, prefix, topic = secured
    props = _properties(tmp_path, broker, "no2pc")
    plain = cli("preflight", "--command-config", props, "--prefix", prefix, "--topic", topic)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    two_pc = cli("preflight", "--command-config", props, "--prefix", prefix, "--topic", topic,
                 "--two-phase-commit", "--json")
    assert two_pc.returncode == 1, two_pc.stdout + two_pc.stderr
    rows = {row["check"]: row for row in json.loads(two_pc.stdout)["rows"]}
    assert rows["2PC ACL"]["status"] == "fail" and "TWO_PHASE_COMMIT" in rows["2PC ACL"]["message"]
    assert "no2pc-secret-pw" not in two_pc.stdout + two_pc.stderr


def test_cli_preflight_two_phase_commit_passes_for_the_super_user(secured, tmp_path):
    broker, prefix, topic = secured
    result = cli("preflight", "--command-config", _properties(tmp_path, broker, "root"),
                 "--prefix", prefix, "--topic", topic, "--two-phase-commit", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {row["check"]: row for row in json.loads(result.stdout)["rows"]}
    assert rows["2PC ACL"]["status"] == "warn" and rows["2PC advertised"]["status"] == "ok"


@pytest.mark.parametrize("action", ["list", "find-hanging"])
def test_listing_without_describe_warns_and_fails_with_strict(secured, tmp_path, action):
    broker, prefix, topic = secured
    root = sasl_config(broker.bootstrap, "root").confluent()
    produce_transaction(root, f"{prefix}0-1", topic, [b"k1"], transaction_timeout_ms=120_000)
    age = ["--min-age", "0s"] if action == "find-hanging" else []
    args = [action, "--prefix", prefix, *age, "--json"]

    seen = cli(*args, "--command-config", _properties(tmp_path, broker, "root"))
    assert seen.returncode == 0 and len(json.loads(seen.stdout)["rows"]) == 1, seen.stderr
    assert "warning" not in seen.stderr

    blind_props = _properties(tmp_path, broker, "blind")
    blind = cli(*args, "--command-config", blind_props)
    assert blind.returncode == 0, blind.stderr
    out = json.loads(blind.stdout)
    assert out["rows"] == [] and out["warnings"], out  # Kafka hid the open transaction
    assert "lacks DESCRIBE on TransactionalId under prefix" in blind.stderr
    assert "kafka-eos-txn runbook missing-acl (" in blind.stderr

    strict = cli(*args, "--strict", "--command-config", blind_props)
    assert strict.returncode == 1, strict.stderr

    viewer = cli(*args, "--strict", "--command-config", _properties(tmp_path, broker, "viewer"))
    assert viewer.returncode == 0 and "warning" not in viewer.stderr, viewer.stderr
    assert len(json.loads(viewer.stdout)["rows"]) == 1


def test_listing_the_whole_cluster_with_prefixed_rights_warns(secured, tmp_path):
    broker, _prefix, _topic = secured
    result = cli("list", "--strict", "--command-config", _properties(tmp_path, broker, "viewer"))
    assert result.returncode == 1 and "on the whole cluster" in result.stderr, result.stderr
