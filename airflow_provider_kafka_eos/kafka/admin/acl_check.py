"""The ACLs an exactly-once pipeline's principal needs, and whether it has them.

Two ways to know. **DescribeAcls** reads the rules themselves; it needs DESCRIBE on the
Cluster, which pipeline principals often lack. Otherwise we **probe** with requests that
change nothing: FindCoordinator/DescribeTransactions on a probe id under the prefix
(DESCRIBE), EndTxn on an unknown probe id (WRITE is checked before the coordinator looks the
id up, and an unknown id is refused without creating it), Metadata with
``include_topic_authorized_operations`` (KIP-430) for topics, DescribeProducers (READ). The
result says which method was used and, per requirement, ok / missing / unknown: a probe we
cannot run honestly (TWO_PHASE_COMMIT would create the id) is reported unknown, never ok.
Rules that say "missing" are cross-checked with the same probes, because a super user (or an
authorizer other than ACLs) has rights no rule shows: those are reported as granted otherwise,
never as a false FAIL. :func:`visibility_gaps` tells the listing commands when Kafka would
silently hide transactions from this principal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# Kafka's numeric codes (AclOperation, ResourceType, PatternType, AclPermissionType).
OPERATIONS = {"ALL": 2, "READ": 3, "WRITE": 4, "DESCRIBE": 8, "TWO_PHASE_COMMIT": 15}
OPERATION_NAMES = {v: k for k, v in OPERATIONS.items()}
RESOURCE_TYPES = {"TOPIC": 2, "CLUSTER": 4, "TRANSACTIONAL_ID": 5}
PATTERN_LITERAL, PATTERN_PREFIXED, PATTERN_ANY = 3, 4, 1
PERMISSION_DENY, PERMISSION_ALLOW = 2, 3
# Operations that imply DESCRIBE on the same resource (Kafka's AclAuthorizer rule).
IMPLIES_DESCRIBE = {"READ", "WRITE", "DELETE", "ALTER"}

AUTHORIZED_OPERATIONS_OMITTED = -2147483648

OK, MISSING, UNKNOWN = "ok", "missing", "unknown"
PROBE_ID_SUFFIX = "kafka-eos-acl-probe"


@dataclass(frozen=True)
class AclRequirement:
    """One permission the pipeline needs; ``prefixed`` means every id starting with ``name``."""

    operation: str
    resource_type: str
    name: str
    prefixed: bool
    why: str

    def describe(self) -> str:
        pattern = "PREFIXED" if self.prefixed else "LITERAL"
        return f"{self.operation} on {self.resource_type} {self.name!r} ({pattern})"

    def kafka_acls_command(self, principal: str | None) -> str:
        """The ``kafka-acls.sh`` line an administrator runs to grant it."""
        who = principal or "User:<pipeline principal>"
        resource = {"TOPIC": "--topic", "TRANSACTIONAL_ID": "--transactional-id", "CLUSTER": "--cluster"}[
            self.resource_type
        ]
        pattern = " --resource-pattern-type prefixed" if self.prefixed else ""
        op = (
            self.operation.replace("_", "").title()
            if self.operation != "TWO_PHASE_COMMIT"
            else "TwoPhaseCommit"
        )
        return (
            f"kafka-acls.sh --bootstrap-server <broker> --add --allow-principal {who} "
            f"--operation {op} {resource} {self.name}{pattern}"
        )


def pipeline_requirements(
    transactional_id_prefix: str,
    topics: Iterable[str],
    *,
    two_phase_commit: bool = False,
    admin_tools: bool = True,
) -> list[AclRequirement]:
    """What the pipeline's principal needs (semantics reference, section 7)."""
    reqs = [
        AclRequirement(
            "WRITE",
            "TRANSACTIONAL_ID",
            transactional_id_prefix,
            True,
            "InitProducerId, AddPartitionsToTxn, EndTxn: prepare and commit",
        ),
        AclRequirement(
            "DESCRIBE",
            "TRANSACTIONAL_ID",
            transactional_id_prefix,
            True,
            "FindCoordinator, ListTransactions, DescribeTransactions: verify, find lingering",
        ),
    ]
    if two_phase_commit:
        reqs.append(
            AclRequirement(
                "TWO_PHASE_COMMIT",
                "TRANSACTIONAL_ID",
                transactional_id_prefix,
                True,
                "InitProducerId v6 with Enable2Pc (KIP-939)",
            )
        )
    for topic in dict.fromkeys(topics):
        reqs.append(
            AclRequirement("WRITE", "TOPIC", topic, False, "transactional Produce to the output topic")
        )
        if admin_tools:
            reqs.append(
                AclRequirement(
                    "READ",
                    "TOPIC",
                    topic,
                    False,
                    "DescribeProducers and read_committed LSO probe (find-hanging)",
                )
            )
    return reqs


@dataclass(frozen=True)
class AclFinding:
    requirement: AclRequirement
    status: str  # ok | missing | unknown
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self.requirement)
        data.update(status=self.status, detail=self.detail)
        return data


@dataclass
class AclCheckResult:
    """Per requirement ok / missing / unknown, and how we found out (``method``)."""

    method: str  # "describe-acls" | "probe" | "no-authorizer"
    principal: str | None
    findings: list[AclFinding] = field(default_factory=list)

    @property
    def missing(self) -> list[AclFinding]:
        return [f for f in self.findings if f.status == MISSING]

    @property
    def unknown(self) -> list[AclFinding]:
        return [f for f in self.findings if f.status == UNKNOWN]

    @property
    def ok(self) -> bool:
        return not self.missing

    def status_of(self, operation: str, resource_type: str) -> str | None:
        """Worst status among requirements with this operation/resource type (None if none asked)."""
        found = [
            f.status
            for f in self.findings
            if f.requirement.operation == operation and f.requirement.resource_type == resource_type
        ]
        for status in (MISSING, UNKNOWN, OK):
            if status in found:
                return status
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "principal": self.principal,
            "findings": [f.to_dict() for f in self.findings],
        }


# -- evaluation of DescribeAcls rules (pure) ----------------------------------------------


@dataclass(frozen=True)
class AclRule:
    """One ACL binding as DescribeAcls returns it (names, not codes)."""

    resource_type: str
    resource_name: str
    prefixed: bool
    principal: str
    host: str
    operation: str
    allow: bool


def _rule_covers_resource(rule: AclRule, req: AclRequirement) -> bool:
    if rule.resource_type != req.resource_type:
        return False
    if not rule.prefixed and rule.resource_name == "*":
        return True
    if rule.prefixed:
        # A PREFIXED rule covers every name under our prefix only if it is a prefix of our prefix.
        return req.name.startswith(rule.resource_name)
    # A LITERAL rule covers a literal requirement; for a prefixed one it covers just one id.
    return not req.prefixed and rule.resource_name == req.name


def _rule_grants_operation(rule: AclRule, operation: str) -> bool:
    if rule.operation in ("ALL", operation):
        return True
    return operation == "DESCRIBE" and rule.operation in IMPLIES_DESCRIBE and rule.allow


def evaluate_rules(principal: str, rules: Sequence[AclRule], req: AclRequirement) -> AclFinding:
    """Kafka's decision for one requirement: any matching DENY wins, else any matching ALLOW."""
    principals = {principal, "User:*"}
    matching = [
        r
        for r in rules
        if r.principal in principals
        and r.host in ("*", "")
        and _rule_covers_resource(r, req)
        and _rule_grants_operation(r, req.operation)
    ]
    denies = [r for r in matching if not r.allow]
    if denies:
        return AclFinding(
            req, MISSING, f"denied by {denies[0].operation} rule on {denies[0].resource_name!r}"
        )
    allows = [r for r in matching if r.allow]
    if allows:
        kind = "prefixed" if allows[0].prefixed else "literal"
        return AclFinding(
            req, OK, f"allowed by {kind} rule {allows[0].operation} on {allows[0].resource_name!r}"
        )
    return AclFinding(req, MISSING, "no ALLOW rule for this principal")


# -- talking to the cluster ---------------------------------------------------------------


def principal_of(config: Any) -> str | None:
    """The principal the broker will name this client, as its default principal builder does.

    ``User:<name>`` for SASL/PLAIN and SCRAM users; ``User:<subject DN>`` for a TLS client
    certificate (mTLS: Kafka's ``ssl.principal.mapping.rules=DEFAULT`` takes the RFC 2253 DN);
    ``User:<sub>`` for an OAUTHBEARER/OIDC token (the broker's default ``sub`` claim), read from a
    token fetched with the client's own credentials. ``None`` when it cannot be known here (Kerberos,
    a keystore we do not read, a token we cannot fetch): the ACL check then probes instead.
    """
    settings = config.confluent() if hasattr(config, "confluent") else dict(config)
    mechanism = str(settings.get("sasl.mechanism") or settings.get("sasl.mechanisms") or "").upper()
    username = settings.get("sasl.username")
    if username and mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        return f"User:{username}"
    protocol = str(settings.get("security.protocol") or "PLAINTEXT").upper()
    if protocol == "PLAINTEXT":
        return "User:ANONYMOUS"
    if protocol == "SSL":
        subject = _certificate_subject(settings)
        return None if subject is None else f"User:{subject}"
    if mechanism == "OAUTHBEARER" and hasattr(config, "kafka_python"):
        subject = _token_subject(config)
        return None if subject is None else f"User:{subject}"
    return None


def _certificate_subject(settings: dict[str, Any]) -> str | None:
    """The RFC 2253 subject DN of the client certificate (PEM file or inline PEM), else None."""
    try:
        from cryptography import x509
    except ImportError:  # the job side may lack it; the ACL check then probes
        return None
    pem = settings.get("ssl.certificate.pem")
    try:
        if not pem and settings.get("ssl.certificate.location"):
            with open(str(settings["ssl.certificate.location"]), "rb") as handle:
                pem = handle.read()
        if not pem:
            return None
        return x509.load_pem_x509_certificate(
            pem if isinstance(pem, bytes) else str(pem).encode()
        ).subject.rfc4514_string()
    except (OSError, ValueError):  # unreadable or not PEM: connecting reports it, with its own error
        return None


def _token_subject(config: Any) -> str | None:
    """The ``sub`` claim of a token from the client's own OAUTHBEARER token provider (unverified:
    only the name is read; the broker verifies the token)."""
    import base64
    import json

    provider = config.kafka_python().get("sasl_oauth_token_provider")
    if provider is None:
        return None
    try:
        payload = provider.token().split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except Exception:  # a token we cannot read only means: probe instead
        return None
    subject = claims.get("sub") if isinstance(claims, dict) else None
    return str(subject) if subject else None


def check_acls(client: Any, requirements: Sequence[AclRequirement], principal: str | None) -> AclCheckResult:
    """DescribeAcls when the principal may read the rules; harmless probes otherwise.

    ACL rules are not the whole truth: a principal in ``super.users`` (or one an authorizer
    other than the ACLs allows) has rights no rule shows. So every requirement the rules leave
    *missing* is cross-checked with its harmless probe: a probe the broker authorizes turns it
    into ok ("granted other than by an ACL rule"); one without a probe (TWO_PHASE_COMMIT) becomes
    unknown when any other cross-check proved the rules incomplete. Never a false FAIL.
    """
    if principal is not None:
        described = _describe_acls(client, principal)
        if described == "security-disabled":
            return AclCheckResult(
                "no-authorizer",
                principal,
                [AclFinding(r, OK, "the cluster has no authorizer") for r in requirements],
            )
        if isinstance(described, list):
            findings = [evaluate_rules(principal, described, r) for r in requirements]
            return AclCheckResult("describe-acls", principal, _cross_check(client, findings))
    return AclCheckResult("probe", principal, [_probe(client, r) for r in requirements])


GRANTED_OTHERWISE = (
    "no ACL rule grants it, yet the broker authorized a harmless probe: the principal is a super user "
    "(super.users) or has the right by other means"
)


def _cross_check(client: Any, findings: list[AclFinding]) -> list[AclFinding]:
    """Probe every requirement the ACL rules leave missing (see :func:`check_acls`)."""
    checked: list[AclFinding] = []
    rules_incomplete = False
    for finding in findings:
        if finding.status != MISSING:
            checked.append(finding)
            continue
        probed = _probe(client, finding.requirement)
        if probed.status == OK:
            rules_incomplete = True
            checked.append(AclFinding(finding.requirement, OK, f"{GRANTED_OTHERWISE} ({probed.detail})"))
        elif probed.status == MISSING:
            checked.append(AclFinding(finding.requirement, MISSING, f"{finding.detail}; {probed.detail}"))
        else:
            checked.append(finding)  # no probe for it: decided below
    if not rules_incomplete:
        return checked
    return [
        AclFinding(
            f.requirement,
            UNKNOWN,
            f"{f.detail}, but the rules are not the whole truth for this principal (other rights were "
            "granted without an ACL rule: a super user?) and this operation cannot be probed harmlessly",
        )
        if f.status == MISSING and _no_harmless_probe(f.requirement)
        else f
        for f in checked
    ]


def _no_harmless_probe(req: AclRequirement) -> bool:
    return req.operation == "TWO_PHASE_COMMIT" or req.resource_type not in ("TRANSACTIONAL_ID", "TOPIC")


# -- what a listing can see -----------------------------------------------------------------

VISIBILITY_PROBE_ID = "kafka-eos-visibility-probe"


def visibility_gaps(client: Any, prefixes: Sequence[str]) -> list[str]:
    """Why a ListTransactions answer may be incomplete for this principal ([] when it is complete).

    Kafka lists only the transactional ids the principal may DESCRIBE, silently: "0
    transaction(s)" from a principal without DESCRIBE is a false negative. A harmless
    DescribeTransactions on a probe id under each prefix (or on an arbitrary id when the whole
    cluster is listed) tells whether the principal can see everything asked for. A DENY rule on
    a few ids under a visible prefix cannot be seen this way.
    """
    from kafka.protocol.admin.transactions import DescribeTransactionsRequest
    from kafka.protocol.metadata import FindCoordinatorRequest

    from airflow_provider_kafka_eos.kafka.protocol.error_codes import (
        NONE,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    )

    targets = [(p, f"{p}{PROBE_ID_SUFFIX}") for p in prefixes] or [(None, VISIBILITY_PROBE_ID)]
    gaps = []
    for prefix, probe_id in targets:
        scope = f"under prefix {prefix!r}" if prefix else "on the whole cluster"
        try:
            found = client.send(FindCoordinatorRequest(key=probe_id, key_type=1, max_version=3))
            code = found.error_code
            if code == NONE:
                described = client.send(
                    DescribeTransactionsRequest(transactional_ids=[probe_id]), node_id=found.node_id
                )
                code = described.transaction_states[0].error_code
        except Exception as exc:  # the listing itself already succeeded; say we could not tell
            gaps.append(
                f"could not check DESCRIBE rights {scope} ({type(exc).__name__}); the list may be partial"
            )
            continue
        if code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            gaps.append(
                f"the principal lacks DESCRIBE on TransactionalId {scope}: Kafka silently leaves out every "
                "transaction it may not describe, so this list may be incomplete (grant DESCRIBE, e.g. a "
                "prefixed ACL, or run as a principal that has it)"
            )
    return gaps


def _describe_acls(client: Any, principal: str) -> list[AclRule] | str | None:
    """Every ALLOW/DENY rule for ``principal`` and ``User:*``; ``None`` when we may not ask."""
    from kafka.protocol.admin import DescribeAclsRequest

    from airflow_provider_kafka_eos.kafka.protocol.error_codes import SECURITY_DISABLED

    rules: list[AclRule] = []
    types = {v: k for k, v in RESOURCE_TYPES.items()}
    for who in (principal, "User:*"):
        request = DescribeAclsRequest(
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=PATTERN_ANY,
            principal_filter=who,
            host_filter=None,
            operation=1,
            permission_type=1,
            min_version=1,
        )
        try:
            response = client.send(request)
        except Exception:
            return None
        if response.error_code == SECURITY_DISABLED:
            return "security-disabled"
        if response.error_code:
            return None
        for resource in response.resources:
            if resource.resource_type not in types:
                continue
            for acl in resource.acls:
                rules.append(
                    AclRule(
                        resource_type=types[resource.resource_type],
                        resource_name=resource.resource_name,
                        prefixed=resource.pattern_type == PATTERN_PREFIXED,
                        principal=acl.principal,
                        host=acl.host,
                        operation=OPERATION_NAMES.get(acl.operation, str(acl.operation)),
                        allow=acl.permission_type == PERMISSION_ALLOW,
                    )
                )
    return rules


def _probe(client: Any, req: AclRequirement) -> AclFinding:
    try:
        if req.resource_type == "TRANSACTIONAL_ID":
            return _probe_transactional_id(client, req)
        if req.resource_type == "TOPIC":
            return _probe_topic(client, req)
    except Exception as exc:  # a probe that cannot run says so; it never reports ok
        return AclFinding(req, UNKNOWN, f"probe failed: {type(exc).__name__}: {exc}")
    return AclFinding(req, UNKNOWN, "no harmless probe for this resource type")


def _probe_id(req: AclRequirement) -> str:
    return f"{req.name}{PROBE_ID_SUFFIX}" if req.prefixed else req.name


def _probe_transactional_id(client: Any, req: AclRequirement) -> AclFinding:
    from kafka.protocol.admin.transactions import DescribeTransactionsRequest
    from kafka.protocol.metadata import FindCoordinatorRequest
    from kafka.protocol.producer.transaction import EndTxnRequest

    from airflow_provider_kafka_eos.kafka.protocol.error_codes import TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    probe_id = _probe_id(req)
    if req.operation == "TWO_PHASE_COMMIT":
        return AclFinding(
            req,
            UNKNOWN,
            "cannot be probed without creating a transactional id; "
            "ask an administrator to check with kafka-acls.sh --list",
        )
    found = client.send(FindCoordinatorRequest(key=probe_id, key_type=1, max_version=3))
    if found.error_code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return AclFinding(req, MISSING, f"FindCoordinator on probe id {probe_id!r} was refused")
    if found.error_code:
        return AclFinding(req, UNKNOWN, f"FindCoordinator answered error {found.error_code}")
    if req.operation == "DESCRIBE":
        described = client.send(
            DescribeTransactionsRequest(transactional_ids=[probe_id]), node_id=found.node_id
        )
        code = described.transaction_states[0].error_code
        if code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            return AclFinding(req, MISSING, f"DescribeTransactions on probe id {probe_id!r} was refused")
        return AclFinding(req, OK, f"DescribeTransactions on probe id {probe_id!r} was authorized")
    if req.operation == "WRITE":
        # EndTxn on an id the coordinator does not know: authorization is checked first, then
        # the coordinator answers INVALID_PRODUCER_ID_MAPPING without creating anything.
        ended = client.send(
            EndTxnRequest(
                transactional_id=probe_id, producer_id=-1, producer_epoch=-1, committed=False, max_version=3
            ),
            node_id=found.node_id,
        )
        if ended.error_code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            return AclFinding(req, MISSING, f"EndTxn on probe id {probe_id!r} was refused")
        return AclFinding(
            req,
            OK,
            f"EndTxn on probe id {probe_id!r} passed authorization "
            f"(error {ended.error_code} from the coordinator, as expected)",
        )
    return AclFinding(req, UNKNOWN, f"no harmless probe for {req.operation}")


def _probe_topic(client: Any, req: AclRequirement) -> AclFinding:
    """KIP-430 authorized operations from Metadata; where a broker omits them, a refused-or-not probe."""
    from kafka.protocol.metadata import MetadataRequest

    from airflow_provider_kafka_eos.kafka.protocol.error_codes import TOPIC_AUTHORIZATION_FAILED

    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=req.name)],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=True,
        min_version=8,
    )
    response = client.send(request)
    topic = next((t for t in response.topics if t.name == req.name), None)
    if topic is not None and topic.error_code == TOPIC_AUTHORIZATION_FAILED:
        return AclFinding(req, MISSING, f"topic {req.name!r} is not even visible (DESCRIBE refused)")
    ops = None if topic is None else topic.authorized_operations
    if ops is not None and ops != AUTHORIZED_OPERATIONS_OMITTED:
        # kafka-python 3 decodes the bit field into the set of bit positions (None when omitted)
        granted = ops if isinstance(ops, (set, frozenset)) else {b for b in range(32) if ops & (1 << b)}
        if OPERATIONS[req.operation] in granted:
            return AclFinding(req, OK, "Metadata reports the operation as authorized (KIP-430)")
        return AclFinding(req, MISSING, "Metadata reports the operation as not authorized (KIP-430)")
    if req.operation == "WRITE":
        return _probe_topic_write(client, req)
    if req.operation == "READ":
        return _probe_topic_read(client, req)
    return AclFinding(req, UNKNOWN, "the broker does not report authorized operations (KIP-430)")


# A partition index no topic has: the broker authorizes first, then finds no such partition,
# so the request is refused or answered UNKNOWN_TOPIC_OR_PARTITION and nothing is written.
_NO_SUCH_PARTITION = 2**31 - 1


def _probe_topic_write(client: Any, req: AclRequirement) -> AclFinding:
    from kafka.protocol.producer import ProduceRequest

    from airflow_provider_kafka_eos.kafka.protocol.error_codes import TOPIC_AUTHORIZATION_FAILED

    data = ProduceRequest.TopicProduceData(
        name=req.name,
        partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=_NO_SUCH_PARTITION, records=b"")
        ],
    )
    response = client.send(
        ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[data], max_version=12)
    )
    codes = [p.error_code for t in response.responses for p in t.partition_responses]
    if TOPIC_AUTHORIZATION_FAILED in codes:
        return AclFinding(
            req, MISSING, "Produce to a non-existent partition was refused with TOPIC_AUTHORIZATION_FAILED"
        )
    return AclFinding(
        req, OK, f"Produce to a non-existent partition passed authorization (error {codes}, nothing written)"
    )


def _probe_topic_read(client: Any, req: AclRequirement) -> AclFinding:
    from kafka.protocol.admin.transactions import DescribeProducersRequest

    from airflow_provider_kafka_eos.kafka.protocol.error_codes import TOPIC_AUTHORIZATION_FAILED

    request = DescribeProducersRequest(
        topics=[DescribeProducersRequest.TopicRequest(name=req.name, partition_indexes=[0])]
    )
    response = client.send(request)
    codes = [p.error_code for t in response.topics for p in t.partitions]
    if TOPIC_AUTHORIZATION_FAILED in codes:
        return AclFinding(req, MISSING, "DescribeProducers was refused with TOPIC_AUTHORIZATION_FAILED")
    return AclFinding(req, OK, f"DescribeProducers passed authorization (error {codes})")
