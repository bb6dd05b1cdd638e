"""Kafka's ACL model: resource patterns, access control entries, bindings, filters.

Pure data and matching rules, no I/O (the authorizer and the stores build on this). The enums
carry Kafka's wire codes (``org.apache.kafka.common.resource.ResourceType`` and friends) so
requests and responses map one to one.

Theory of operation
-------------------
An :class:`AclBinding` is a :class:`ResourcePattern` (type, name, LITERAL or PREFIXED) plus an
:class:`AccessControlEntry` (principal, host, operation, ALLOW/DENY). A LITERAL pattern named
``*`` matches every resource of its type; a PREFIXED pattern every resource whose name starts
with its name. Filters (DescribeAcls/DeleteAcls) may also use ANY (every pattern type, the
name compared exactly) and MATCH (every pattern that would apply to the named resource).

Invariants: a stored binding never holds ANY/MATCH/UNKNOWN values (``validate_binding``);
principals are ``Type:name`` strings (``User:alice``, ``User:*`` for everyone).

Handlers declare what they check with :class:`Requires` (as Kafka's KafkaApis does per request, so an
authorization matrix test can enumerate them), e.g.
``@api(ApiKey.PRODUCE, versions=..., authz=(Requires(WRITE, TOPIC, TOPIC_AUTHORIZATION_FAILED,
"each topic"),))``; the authorization matrix test reads those declarations.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from protocol.errors import ErrorCode


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID

CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name
WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"

# Kafka's implications: an ALLOW for any of these operations also allows the key.
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}

# Operations an ACL may name per resource type (Kafka's AclEntry.supportedOperations), ALL aside.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                                   AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                                   AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                                   AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),  # 4.0: KIP-848
    ResourceType.CLUSTER: frozenset({AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                                     AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                                     AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}

# Names as Kafka's ZooKeeper JSON and kafka-acls.sh print them.
RESOURCE_TYPE_NAMES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
                       ResourceType.TRANSACTIONAL_ID: "TransactionalId",
                       ResourceType.DELEGATION_TOKEN: "DelegationToken", ResourceType.USER: "User"}
OPERATION_NAMES = {op: "".join(w.capitalize() for w in op.name.split("_")) for op in AclOperation}
PERMISSION_NAMES = {AclPermissionType.ALLOW: "Allow", AclPermissionType.DENY: "Deny"}


class AclError(ValueError):
    """An invalid ACL or filter: answered as INVALID_REQUEST with this message."""


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return f"{RESOURCE_TYPE_NAMES.get(self.resource_type, self.resource_type.name)}:" \
               f"{self.pattern_type.name}:{self.name}"

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        """Does this (stored) pattern apply to the concrete resource?"""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.name == name or self.name == WILDCARD_RESOURCE
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.name)


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, " \
               f"permissionType={self.permission_type.name})"


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """DescribeAcls/DeleteAcls filter; ``None`` name/principal/host match anything."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def validate(self) -> None:
        for value, enum in ((self.resource_type, ResourceType), (self.pattern_type, PatternType),
                            (self.operation, AclOperation), (self.permission_type, AclPermissionType)):
            if value == enum.UNKNOWN:  # type: ignore[attr-defined]
                raise AclError(f"Filter contains UNKNOWN {enum.__name__}")

    def matches_pattern(self, p: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, p.resource_type):
            return False
        pt = self.pattern_type
        if pt == PatternType.ANY:
            return self.name is None or self.name == p.name
        if pt == PatternType.MATCH:
            if self.name is None:
                return True
            return p.matches_resource(p.resource_type, self.name)
        return pt == p.pattern_type and (self.name is None or self.name == p.name)

    def matches_entry(self, e: AccessControlEntry) -> bool:
        return (self.principal is None or self.principal == e.principal) and \
            (self.host is None or self.host == e.host) and \
            self.operation in (AclOperation.ANY, e.operation) and \
            self.permission_type in (AclPermissionType.ANY, e.permission_type)

    def matches(self, b: AclBinding) -> bool:
        return self.matches_pattern(b.pattern) and self.matches_entry(b.entry)


def _enum(enum: type[IntEnum], value: int, what: str) -> IntEnum:
    try:
        return enum(value)
    except ValueError as e:
        raise AclError(f"Unknown {what} {value}") from e


def parse_principal(principal: str) -> tuple[str, str]:
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise AclError(f"Invalid principal {principal!r}: expected Type:name, e.g. User:alice")
    return kind, name


def make_binding(resource_type: int, name: str, pattern_type: int, principal: str, host: str,
                 operation: int, permission_type: int) -> AclBinding:
    """A binding from wire values, validated as Kafka's authorizer validates CreateAcls."""
    rt = ResourceType(_enum(ResourceType, resource_type, "resource type"))
    pt = PatternType(_enum(PatternType, pattern_type, "pattern type"))
    op = AclOperation(_enum(AclOperation, operation, "operation"))
    perm = AclPermissionType(_enum(AclPermissionType, permission_type, "permission type"))
    if rt in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise AclError(f"Invalid resource type {rt.name}")
    if pt not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclError(f"Invalid pattern type {pt.name}: only LITERAL and PREFIXED ACLs can be created")
    if op in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise AclError(f"Invalid operation {op.name}")
    if perm in (AclPermissionType.ANY, AclPermissionType.UNKNOWN):
        raise AclError(f"Invalid permission type {perm.name}")
    if not name:
        raise AclError("Resource name must not be empty")
    if rt == ResourceType.CLUSTER and name != CLUSTER_NAME:
        raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if pt == PatternType.PREFIXED and name == WILDCARD_RESOURCE:
        raise AclError("A PREFIXED pattern cannot be the wildcard '*'; use LITERAL '*'")
    if op != AclOperation.ALL and op not in SUPPORTED_OPERATIONS.get(rt, frozenset()):
        raise AclError(f"ACL operation {op.name} is not valid for resource type {rt.name}")
    parse_principal(principal)
    if not host:
        raise AclError("Host must not be empty (use '*' for any host)")
    return AclBinding(ResourcePattern(rt, name, pt), AccessControlEntry(principal, host, op, perm))


class Requires(NamedTuple):
    """What a handler checks: ``operation`` on ``resource``; a denial answers ``error``.

    ``scope`` says which part of the request names the resource ("each topic", "group_id",
    "transactional_id if set", ...) and, for a check with an alternative, Kafka's rule.
    """

    operation: AclOperation
    resource: ResourceType
    error: ErrorCode
    scope: str = ""


# Shorthands for the declarations in broker/apis.
READ, WRITE, CREATE, DELETE = AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE
ALTER, DESCRIBE, CLUSTER_ACTION = AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION
DESCRIBE_CONFIGS, ALTER_CONFIGS = AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS
IDEMPOTENT_WRITE = AclOperation.IDEMPOTENT_WRITE
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
NO_AUTHZ: tuple[Requires, ...] = ()  # the API needs no authorization (ApiVersions, SASL)
