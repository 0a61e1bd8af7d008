"""The embedded broker's authorizer and the CreateAcls / DescribeAcls / DeleteAcls APIs.

Follows Kafka's ``StandardAuthorizer`` rules so that the project's ACL checks and error paths
(missing WRITE on a TransactionalId, missing TWO_PHASE_COMMIT, ...) can be tested without a JVM:
super users may do anything; a matching DENY wins over any ALLOW; READ, WRITE, DELETE and ALTER
imply DESCRIBE (ALTER_CONFIGS implies DESCRIBE_CONFIGS); ALL matches every operation; ``User:*``
matches every principal; LITERAL ``*`` matches every name; PREFIXED matches by prefix; no matching
ALLOW means deny (``allow.everyone.if.no.acl.found=false``).
"""

from __future__ import annotations

import json
import pathlib
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin.acl import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)

from kafka_eos_testing.broker.api import RequestContext, handles
from kafka_eos_testing.broker.txn_state import Err

# AclOperation.java; TWO_PHASE_COMMIT (15) is KIP-939's and missing from kafka-python's enum.
OPERATIONS = {
    "UNKNOWN": 0,
    "ANY": 1,
    "ALL": 2,
    "READ": 3,
    "WRITE": 4,
    "CREATE": 5,
    "DELETE": 6,
    "ALTER": 7,
    "DESCRIBE": 8,
    "CLUSTER_ACTION": 9,
    "DESCRIBE_CONFIGS": 10,
    "ALTER_CONFIGS": 11,
    "IDEMPOTENT_WRITE": 12,
    "CREATE_TOKENS": 13,
    "DESCRIBE_TOKENS": 14,
    "TWO_PHASE_COMMIT": 15,
}
RESOURCE_TYPES = {
    "UNKNOWN": 0,
    "ANY": 1,
    "TOPIC": 2,
    "GROUP": 3,
    "CLUSTER": 4,
    "TRANSACTIONAL_ID": 5,
    "DELEGATION_TOKEN": 6,
    "USER": 7,
}
PATTERN_TYPES = {"UNKNOWN": 0, "ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
PERMISSIONS = {"UNKNOWN": 0, "ANY": 1, "DENY": 2, "ALLOW": 3}
_NAMES = {
    table_id: {code: name for name, code in table.items()}
    for table_id, table in (
        ("op", OPERATIONS),
        ("rt", RESOURCE_TYPES),
        ("pt", PATTERN_TYPES),
        ("perm", PERMISSIONS),
    )
}
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

# An ALLOW of any of these grants the key operation (AclEntry.supportedOperations / implied ops).
_IMPLIED_BY = {
    "DESCRIBE": frozenset({"DESCRIBE", "READ", "WRITE", "DELETE", "ALTER", "ALL"}),
    "DESCRIBE_CONFIGS": frozenset({"DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALL"}),
}


class AclValidationError(ValueError):
    """An ACL (from the file or CreateAcls) that Kafka would refuse."""


@dataclass(frozen=True)
class AclBinding:
    """One ACL: names, not codes, so files and logs read as Kafka's CLI prints them."""

    principal: str
    resource_type: str
    pattern_type: str
    name: str
    operation: str
    permission: str
    host: str = WILDCARD

    def validate(self) -> AclBinding:
        if self.resource_type not in RESOURCE_TYPES or self.resource_type in ("ANY", "UNKNOWN"):
            raise AclValidationError(f"invalid resource type {self.resource_type!r}")
        if self.pattern_type not in ("LITERAL", "PREFIXED"):
            raise AclValidationError(f"invalid pattern type {self.pattern_type!r}: use LITERAL or PREFIXED")
        if self.operation not in OPERATIONS or self.operation in ("ANY", "UNKNOWN"):
            raise AclValidationError(f"invalid operation {self.operation!r}")
        if self.permission not in ("ALLOW", "DENY"):
            raise AclValidationError(f"invalid permission {self.permission!r}: use ALLOW or DENY")
        if ":" not in self.principal:
            raise AclValidationError(
                f"invalid principal {self.principal!r}: expected Type:name, e.g. User:alice"
            )
        if self.resource_type == "CLUSTER" and self.name != CLUSTER_NAME:
            raise AclValidationError(f"the only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        if not self.name:
            raise AclValidationError("the resource name must not be empty")
        return self

    def applies_to(self, name: str) -> bool:
        if self.pattern_type == "PREFIXED":
            return name.startswith(self.name)
        return self.name in (name, WILDCARD)


@dataclass(frozen=True)
class AclFilter:
    """``AclBindingFilter``: None / ANY match everything; MATCH selects ACLs that apply to a name."""

    resource_type: str = "ANY"
    name: str | None = None
    pattern_type: str = "ANY"
    principal: str | None = None
    host: str | None = None
    operation: str = "ANY"
    permission: str = "ANY"

    def validate(self) -> AclFilter:
        for value, table, what in (
            (self.resource_type, RESOURCE_TYPES, "resource type"),
            (self.pattern_type, PATTERN_TYPES, "pattern type"),
            (self.operation, OPERATIONS, "operation"),
            (self.permission, PERMISSIONS, "permission"),
        ):
            if value not in table or value == "UNKNOWN":
                raise AclValidationError(f"invalid {what} filter {value!r}")
        return self

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type not in ("ANY", acl.resource_type):
            return False
        if self.pattern_type == "MATCH":
            if self.name is not None and not acl.applies_to(self.name):
                return False
        elif self.pattern_type == "ANY":
            if self.name is not None and acl.name != self.name:
                return False
        elif self.pattern_type != acl.pattern_type or (self.name is not None and acl.name != self.name):
            return False
        return (
            self.principal in (None, acl.principal)
            and self.host in (None, acl.host)
            and self.operation in ("ANY", acl.operation)
            and self.permission in ("ANY", acl.permission)
        )


class Authorizer:
    """ACL evaluation for one broker; ACLs may change at runtime through CreateAcls/DeleteAcls."""

    def __init__(
        self,
        acls: Iterable[AclBinding] = (),
        *,
        super_users: Iterable[str] = (),
        users: dict[str, str] | None = None,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.users = dict(users or {})  # SASL/PLAIN credentials, read by the network layer
        self._lock = threading.Lock()
        self._acls: list[AclBinding] = []
        self._by_type: dict[str, list[AclBinding]] = {}
        self.add([acl.validate() for acl in acls])

    @classmethod
    def from_file(cls, path: str | pathlib.Path) -> Authorizer:
        """Load ``{"users": {...}, "super_users": [...], "acls": [...]}``; a bad entry names itself."""
        try:
            doc = json.loads(pathlib.Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise AclValidationError(f"cannot read ACL file {path}: {exc}") from exc
        acls = []
        for index, entry in enumerate(doc.get("acls", [])):
            try:
                acls.append(acl_from_mapping(entry).validate())
            except (KeyError, TypeError, AclValidationError) as exc:
                raise AclValidationError(f"ACL file {path}, acls[{index}]: {exc}") from exc
        return cls(acls, super_users=doc.get("super_users", []), users=doc.get("users", {}))

    def acls(self) -> list[AclBinding]:
        with self._lock:
            return list(self._acls)

    def add(self, acls: Iterable[AclBinding]) -> None:
        with self._lock:
            for acl in acls:
                if acl not in self._acls:
                    self._acls.append(acl)
            self._reindex()

    def remove(self, acl_filter: AclFilter) -> list[AclBinding]:
        with self._lock:
            removed = [acl for acl in self._acls if acl_filter.matches(acl)]
            if removed:
                self._acls = [acl for acl in self._acls if not acl_filter.matches(acl)]
                self._reindex()
            return removed

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        with self._lock:
            return [acl for acl in self._acls if acl_filter.matches(acl)]

    def _reindex(self) -> None:
        by_type: dict[str, list[AclBinding]] = {}
        for acl in self._acls:
            by_type.setdefault(acl.resource_type, []).append(acl)
        self._by_type = by_type

    def _principal_matches(self, acl: AclBinding, principal: str, host: str | None) -> bool:
        return acl.principal in (principal, WILDCARD_PRINCIPAL) and (acl.host == WILDCARD or acl.host == host)

    def authorize(
        self, principal: str, operation: str, resource_type: str, name: str, host: str | None = None
    ) -> bool:
        if principal in self.super_users:
            return True
        allowed_by = _IMPLIED_BY.get(operation, frozenset({operation, "ALL"}))
        allowed = False
        for acl in self._by_type.get(resource_type, ()):
            if not self._principal_matches(acl, principal, host) or not acl.applies_to(name):
                continue
            if acl.permission == "DENY":
                if acl.operation in (operation, "ALL"):
                    return False
            elif acl.operation in allowed_by:
                allowed = True
        return allowed

    def authorize_by_resource_type(
        self, principal: str, operation: str, resource_type: str, host: str | None = None
    ) -> bool:
        """``authorizeByResourceType``: may the principal do ``operation`` on *some* resource of the type?

        True when an ALLOW exists that no DENY covers (a LITERAL ``*`` deny, a deny of the same
        literal name, or a PREFIXED deny that is a prefix of the allowed name or prefix).
        """
        if principal in self.super_users:
            return True
        allowed_by = _IMPLIED_BY.get(operation, frozenset({operation, "ALL"}))
        relevant = [
            a for a in self._by_type.get(resource_type, ()) if self._principal_matches(a, principal, host)
        ]
        denies = [a for a in relevant if a.permission == "DENY" and a.operation in (operation, "ALL")]
        if any(d.pattern_type == "LITERAL" and d.name == WILDCARD for d in denies):
            return False
        for allow in relevant:
            if allow.permission != "ALLOW" or allow.operation not in allowed_by:
                continue
            covered = any(
                (d.pattern_type == "PREFIXED" and allow.name.startswith(d.name))
                or (d.pattern_type == "LITERAL" and allow.pattern_type == "LITERAL" and d.name == allow.name)
                for d in denies
            )
            if not covered:
                return True
        return False


def acl_from_mapping(entry: dict[str, Any]) -> AclBinding:
    """An ACL from the file's JSON shape (names upper-cased; pattern LITERAL, ALLOW, host * by default)."""
    return AclBinding(
        principal=entry["principal"],
        resource_type=str(entry["resource_type"]).upper(),
        pattern_type=str(entry.get("pattern_type", "LITERAL")).upper(),
        name=entry["name"],
        operation=str(entry["operation"]).upper(),
        permission=str(entry.get("permission", "ALLOW")).upper(),
        host=entry.get("host", WILDCARD),
    )


def _name(table: str, code: int) -> str:
    return _NAMES[table].get(code, "UNKNOWN")


def _authorizer(ctx: RequestContext) -> Authorizer | None:
    return getattr(ctx.broker, "authorizer", None)


def _filter_from_request(item: Any) -> AclFilter:
    return AclFilter(
        resource_type=_name("rt", item.resource_type_filter),
        name=item.resource_name_filter,
        pattern_type=_name("pt", item.pattern_type_filter),
        principal=item.principal_filter,
        host=item.host_filter,
        operation=_name("op", item.operation),
        permission=_name("perm", item.permission_type),
    ).validate()


@handles(CreateAclsRequest, CreateAclsResponse, min_version=1, max_version=3)
def handle_create_acls(ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    result_cls = CreateAclsResponse.AclCreationResult
    authorizer = _authorizer(ctx)
    results = []
    valid: list[AclBinding] = []
    for creation in req.creations:
        if authorizer is None:
            results.append(
                result_cls(error_code=Err.SECURITY_DISABLED, error_message="No authorizer is configured.")
            )
            continue
        if not ctx.authorized("ALTER", "CLUSTER", CLUSTER_NAME):
            results.append(result_cls(error_code=Err.CLUSTER_AUTHORIZATION_FAILED, error_message=None))
            continue
        try:
            acl = AclBinding(
                principal=creation.principal,
                resource_type=_name("rt", creation.resource_type),
                pattern_type=_name("pt", creation.resource_pattern_type),
                name=creation.resource_name,
                operation=_name("op", creation.operation),
                permission=_name("perm", creation.permission_type),
                host=creation.host,
            ).validate()
        except AclValidationError as exc:
            results.append(result_cls(error_code=Err.INVALID_REQUEST, error_message=str(exc)))
            continue
        valid.append(acl)
        results.append(result_cls(error_code=0, error_message=None))
    if authorizer is not None and valid:
        authorizer.add(valid)
    return CreateAclsResponse(throttle_time_ms=0, results=results)


@handles(DescribeAclsRequest, DescribeAclsResponse, min_version=1, max_version=3)
def handle_describe_acls(ctx: RequestContext, req: DescribeAclsRequest) -> DescribeAclsResponse:
    def error(code: Err, message: str | None) -> DescribeAclsResponse:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=code, error_message=message, resources=[])

    authorizer = _authorizer(ctx)
    if authorizer is None:
        return error(Err.SECURITY_DISABLED, "No authorizer is configured.")
    if not ctx.authorized("DESCRIBE", "CLUSTER", CLUSTER_NAME):
        return error(Err.CLUSTER_AUTHORIZATION_FAILED, None)
    try:
        acl_filter = _filter_from_request(req)
    except AclValidationError as exc:
        return error(Err.INVALID_REQUEST, str(exc))
    resource_cls = DescribeAclsResponse.DescribeAclsResource
    acl_cls = resource_cls.AclDescription
    grouped: dict[tuple[str, str, str], list] = {}
    for acl in authorizer.describe(acl_filter):
        grouped.setdefault((acl.resource_type, acl.name, acl.pattern_type), []).append(
            acl_cls(
                principal=acl.principal,
                host=acl.host,
                operation=OPERATIONS[acl.operation],
                permission_type=PERMISSIONS[acl.permission],
            )
        )
    resources = [
        resource_cls(
            resource_type=RESOURCE_TYPES[rt], resource_name=name, pattern_type=PATTERN_TYPES[pt], acls=acls
        )
        for (rt, name, pt), acls in grouped.items()
    ]
    return DescribeAclsResponse(throttle_time_ms=0, error_code=0, error_message=None, resources=resources)


@handles(DeleteAclsRequest, DeleteAclsResponse, min_version=1, max_version=3)
def handle_delete_acls(ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    result_cls = DeleteAclsResponse.DeleteAclsFilterResult
    matching_cls = result_cls.DeleteAclsMatchingAcl
    authorizer = _authorizer(ctx)
    results = []
    for item in req.filters:
        if authorizer is None:
            results.append(
                result_cls(
                    error_code=Err.SECURITY_DISABLED,
                    error_message="No authorizer is configured.",
                    matching_acls=[],
                )
            )
            continue
        if not ctx.authorized("ALTER", "CLUSTER", CLUSTER_NAME):
            results.append(
                result_cls(error_code=Err.CLUSTER_AUTHORIZATION_FAILED, error_message=None, matching_acls=[])
            )
            continue
        try:
            acl_filter = _filter_from_request(item)
        except AclValidationError as exc:
            results.append(
                result_cls(error_code=Err.INVALID_REQUEST, error_message=str(exc), matching_acls=[])
            )
            continue
        removed = authorizer.remove(acl_filter)
        results.append(
            result_cls(
                error_code=0,
                error_message=None,
                matching_acls=[
                    matching_cls(
                        error_code=0,
                        error_message=None,
                        resource_type=RESOURCE_TYPES[acl.resource_type],
                        resource_name=acl.name,
                        pattern_type=PATTERN_TYPES[acl.pattern_type],
                        principal=acl.principal,
                        host=acl.host,
                        operation=OPERATIONS[acl.operation],
                        permission_type=PERMISSIONS[acl.permission],
                    )
                    for acl in removed
                ],
            )
        )
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)
