"""ACL checks and the 2PC ACL against an embedded broker with an authorizer and SASL/PLAIN users.

Three principals: ``full`` may read the ACLs (DESCRIBE on the Cluster: checked with
DescribeAcls) and has everything, ``no2pc`` likewise but without TWO_PHASE_COMMIT, ``weak``
cannot read ACLs (checked by probes) and lacks WRITE on the output topic.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from eos_preflight_helpers import sasl_config

from airflow_provider_kafka_eos import runbook
from airflow_provider_kafka_eos.kafka.errors import PreflightError
from airflow_provider_kafka_eos.kafka.operations.preflight import RetrySchedule, run_preflight

pytestmark = pytest.mark.broker

CLI = str(Path(sys.executable).with_name("kafka-eos-txn"))
SCHEDULE = RetrySchedule.of(retries=2, retry_delay=30, execution_timeout=60)


def _acl(principal, rtype, name, op, pattern="LITERAL"):
    return {
        "principal": f"User:{principal}",
        "resource_type": rtype,
        "name": name,
        "operation": op,
        "pattern_type": pattern,
    }


@pytest.fixture
def secured(kafka_broker_factory, unique_name, tmp_path):
    prefix, topic = unique_name("acl") + "-", unique_name("acl-topic")
    acls = []
    for user in ("full", "no2pc"):
        acls += [
            _acl(user, "TRANSACTIONAL_ID", prefix, "WRITE", "PREFIXED"),
            _acl(user, "TOPIC", topic, "WRITE"),
            _acl(user, "TOPIC", topic, "READ"),
            _acl(user, "CLUSTER", "kafka-cluster", "DESCRIBE"),
            _acl(user, "CLUSTER", "kafka-cluster", "DESCRIBE_CONFIGS"),
        ]
    acls.append(_acl("full", "TRANSACTIONAL_ID", prefix, "TWO_PHASE_COMMIT", "PREFIXED"))
    acls += [
        _acl("weak", "TRANSACTIONAL_ID", prefix, "WRITE", "PREFIXED"),
        _acl("weak", "TOPIC", topic, "READ"),
    ]
    path = tmp_path / "acls.json"
    path.write_text(
        json.dumps({"users": {u: f"{u}-secret-pw" for u in ("full", "no2pc", "weak")}, "acls": acls})
    )
    broker = kafka_broker_factory(acl_file=str(path), two_phase_commit=True)
    return broker, prefix, topic


def preflight(broker, user, prefix, topic, **kwargs):
    return run_preflight(
        sasl_config(broker.bootstrap, user),
        transactional_id_prefix=prefix,
        topics=[topic],
        transaction_timeout_ms=900_000,
        job_duration_budget_s=300,
        commit_schedule=SCHEDULE,
        **kwargs,
    )


def test_principal_with_every_acl_passes_a_2pc_preflight_via_describe_acls(secured):
    broker, prefix, topic = secured
    report = preflight(broker, "full", prefix, topic, two_phase_commit=True)
    assert report.ok, report.render()
    assert report.acls["method"] == "describe-acls" and report.acls["principal"] == "User:full"
    assert {f["status"] for f in report.acls["findings"]} == {"ok"}
    producer = next(c for c in report.checks if c.name == "2PC producer config").details["producer_config"]
    assert producer["transaction.two.phase.commit.enable"] is True


def test_missing_two_phase_commit_acl_blocks_2pc_only(secured):
    broker, prefix, topic = secured
    assert preflight(broker, "no2pc", prefix, topic).ok  # commit-by-resume needs no TWO_PHASE_COMMIT
    with pytest.raises(PreflightError) as err:
        preflight(broker, "no2pc", prefix, topic, two_phase_commit=True)
    assert f"2PC ACL: TWO_PHASE_COMMIT on TransactionalId prefix {prefix!r} is missing" in str(err.value)
    assert "kafka-eos-txn runbook missing-acl (" in str(err.value)


def test_principal_without_describe_acls_is_probed_and_missing_write_named(secured):
    broker, prefix, topic = secured
    report = preflight(broker, "weak", prefix, topic, raise_on_failure=False)
    assert report.acls["method"] == "probe"
    by_name = {c.name: c for c in report.checks}
    assert by_name[f"ACL WRITE topic {topic}"].status == "fail"
    assert (
        "--allow-principal User:weak --operation Write --topic " + topic
        in by_name[f"ACL WRITE topic {topic}"].message
    )
    assert by_name[f"ACL WRITE transactional_id {prefix}"].status == "ok"
    assert by_name[f"ACL READ topic {topic}"].status == "ok"
    assert [c.name for c in report.failures] == [f"ACL WRITE topic {topic}"]
    assert "weak-secret-pw" not in report.to_json()


def test_cli_preflight_reports_missing_acl_with_exit_1(secured, tmp_path):
    broker, prefix, topic = secured
    props = tmp_path / "weak.properties"
    props.write_text(
        f"bootstrap.servers={broker.bootstrap}\nsecurity.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=PLAIN\nsasl.username=weak\nsasl.password=weak-secret-pw\n"
    )
    result = subprocess.run(
        [
            CLI,
            "preflight",
            "--command-config",
            str(props),
            "--prefix",
            prefix,
            "--topic",
            topic,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result.stderr
    rows = {r["check"]: r for r in json.loads(result.stdout)["rows"]}
    assert rows[f"ACL WRITE topic {topic}"]["status"] == "fail"
    assert rows[f"ACL WRITE topic {topic}"]["runbook"] == runbook.reference("missing-acl")
    assert "weak-secret-pw" not in result.stdout + result.stderr
