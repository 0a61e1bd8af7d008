"""ACL requirements and the evaluation of DescribeAcls rules (Kafka's AclAuthorizer semantics)."""

from __future__ import annotations

from airflow_provider_kafka_eos.kafka.admin.acl_check import (
    AclRule,
    evaluate_rules,
    pipeline_requirements,
    principal_of,
)

ME = "User:etl"


def rule(op, rtype, name, *, prefixed=False, principal=ME, allow=True):
    return AclRule(rtype, name, prefixed, principal, "*", op, allow)


def test_requirements_cover_prefix_topics_and_2pc_only_when_asked():
    plain = pipeline_requirements("etl-", ["out", "out"])
    described = {r.describe() for r in plain}
    assert described == {
        "WRITE on TRANSACTIONAL_ID 'etl-' (PREFIXED)",
        "DESCRIBE on TRANSACTIONAL_ID 'etl-' (PREFIXED)",
        "WRITE on TOPIC 'out' (LITERAL)",
        "READ on TOPIC 'out' (LITERAL)",
    }
    two_pc = pipeline_requirements("etl-", ["out"], two_phase_commit=True)
    assert any(r.operation == "TWO_PHASE_COMMIT" for r in two_pc)
    assert "--operation TwoPhaseCommit --transactional-id etl- --resource-pattern-type prefixed" in next(
        r for r in two_pc if r.operation == "TWO_PHASE_COMMIT"
    ).kafka_acls_command(ME)


def test_prefixed_rule_covers_longer_prefix_but_literal_does_not():
    write_prefix = pipeline_requirements("etl-orders-", [])[0]
    assert (
        evaluate_rules(ME, [rule("WRITE", "TRANSACTIONAL_ID", "etl-", prefixed=True)], write_prefix).status
        == "ok"
    )
    assert (
        evaluate_rules(ME, [rule("WRITE", "TRANSACTIONAL_ID", "etl-orders-")], write_prefix).status
        == "missing"
    )
    assert (
        evaluate_rules(ME, [rule("WRITE", "TRANSACTIONAL_ID", "other-", prefixed=True)], write_prefix).status
        == "missing"
    )
    assert evaluate_rules(ME, [rule("ALL", "TRANSACTIONAL_ID", "*")], write_prefix).status == "ok"


def test_write_implies_describe_and_deny_wins():
    describe = pipeline_requirements("etl-", [])[1]
    grant = rule("WRITE", "TRANSACTIONAL_ID", "etl-", prefixed=True)
    assert evaluate_rules(ME, [grant], describe).status == "ok"
    deny = rule("DESCRIBE", "TRANSACTIONAL_ID", "*", allow=False)
    finding = evaluate_rules(ME, [grant, deny], describe)
    assert finding.status == "missing" and "denied" in finding.detail


def test_wildcard_principal_and_other_principals():
    write_topic = next(r for r in pipeline_requirements("etl-", ["out"]) if r.resource_type == "TOPIC")
    assert evaluate_rules(ME, [rule("WRITE", "TOPIC", "out", principal="User:*")], write_topic).status == "ok"
    assert (
        evaluate_rules(ME, [rule("WRITE", "TOPIC", "out", principal="User:bob")], write_topic).status
        == "missing"
    )
    # READ does not grant WRITE.
    assert evaluate_rules(ME, [rule("READ", "TOPIC", "out")], write_topic).status == "missing"


def test_principal_from_client_config():
    assert (
        principal_of({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "etl"})
        == "User:etl"
    )
    assert principal_of({"bootstrap.servers": "b:9092"}) == "User:ANONYMOUS"
    assert principal_of({"security.protocol": "SSL"}) is None


def test_principal_of_a_client_certificate_is_its_subject_dn(tmp_path):
    from kafka_eos_testing.apache_kafka.certs import CertificateAuthority

    issued = CertificateAuthority(tmp_path).issue("etl", common_name="etl", client=True, organization="acme")
    config = {"security.protocol": "SSL", "ssl.certificate.location": str(issued.cert)}
    assert principal_of(config) == "User:CN=etl,O=acme" == f"User:{issued.subject}"
    pem = {"security.protocol": "SSL", "ssl.certificate.pem": issued.cert.read_text()}
    assert principal_of(pem) == "User:CN=etl,O=acme"
    # Unreadable or not a certificate: unknown here (connecting names the file's own error).
    missing = {"security.protocol": "SSL", "ssl.certificate.location": str(tmp_path / "no")}
    assert principal_of(missing) is None


def test_principal_of_an_oauthbearer_client_is_its_token_subject():
    """The token provider is stubbed: the loopback identity provider is in tests/system/secured."""
    import base64
    import json

    def jwt(claims):
        body = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
        return f"e30.{body}.sig"

    class Config:
        def __init__(self, token):
            self._token = token

        def confluent(self):
            return {"security.protocol": "SASL_SSL", "sasl.mechanisms": "OAUTHBEARER"}

        def kafka_python(self):
            return {"sasl_oauth_token_provider": type("P", (), {"token": lambda _self: self._token})()}

    assert principal_of(Config(jwt({"sub": "etl-svc", "aud": "kafka"}))) == "User:etl-svc"
    assert principal_of(Config(jwt({"aud": "kafka"}))) is None
    assert principal_of(Config("not-a-jwt")) is None
