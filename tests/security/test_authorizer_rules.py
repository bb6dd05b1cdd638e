"""Pure tests of the authorizer's and the quota manager's rules (no broker): Kafka's ACL
semantics one by one, filters, the file stores, the quota entity hierarchy and the rate."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from broker.security.acl import (
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    make_binding,
)
from broker.security.acl_store import FileAclStore
from broker.security.authorizer import AclAuthorizer
from broker.security.quotas import DEFAULT, ClientQuotaManager, FileQuotaStore, QuotaError, Rate

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


def authz(tmp_path: Path, *acls: tuple, super_users: tuple[str, ...] = (), everyone: bool = False) -> AclAuthorizer:
    tmp_path.mkdir(parents=True, exist_ok=True)
    a = AclAuthorizer(FileAclStore(tmp_path / "acls.json"), super_users, everyone)
    a.load()
    asyncio.run(a.create_acls([make_binding(rt, name, pt, principal, host, op, perm)
                               for rt, name, pt, principal, host, op, perm in acls]))
    return a


def ok(a: AclAuthorizer, op: AclOperation, rt: ResourceType, name: str, principal: str = "User:alice",
       host: str = "10.0.0.1") -> bool:
    return a.authorize(principal, host, op, rt, name, log_denied=False)


def test_no_acl_denies_unless_allow_everyone(tmp_path: Path) -> None:
    assert not ok(authz(tmp_path), Op.READ, T, "t")
    assert ok(authz(tmp_path / "x", everyone=True), Op.READ, T, "t")
    # ... but once the resource has any ACL, allow.everyone no longer applies
    a = authz(tmp_path / "y", (T, "t", LIT, "User:bob", "*", Op.READ, ALLOW), everyone=True)
    assert not ok(a, Op.READ, T, "t") and ok(a, Op.READ, T, "other")


def test_literal_wildcard_prefixed_and_implications(tmp_path: Path) -> None:
    a = authz(tmp_path, (T, "orders", LIT, "User:alice", "*", Op.WRITE, ALLOW),
              (T, "*", LIT, "User:alice", "*", Op.DESCRIBE_CONFIGS, ALLOW),
              (T, "pay-", PRE, "User:alice", "*", Op.ALTER_CONFIGS, ALLOW),
              (G, "*", LIT, "User:*", "*", Op.READ, ALLOW))
    assert ok(a, Op.WRITE, T, "orders") and ok(a, Op.DESCRIBE, T, "orders")  # WRITE implies DESCRIBE
    assert not ok(a, Op.READ, T, "orders")
    assert ok(a, Op.DESCRIBE_CONFIGS, T, "anything")  # the LITERAL wildcard
    assert ok(a, Op.ALTER_CONFIGS, T, "pay-eu") and not ok(a, Op.ALTER_CONFIGS, T, "pa")
    assert ok(a, Op.DESCRIBE_CONFIGS, T, "pay-eu")  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert not ok(a, Op.DESCRIBE, T, "pay-eu")
    assert ok(a, Op.READ, G, "g1", principal="User:carol")  # User:* is everyone
    assert ok(a, Op.DESCRIBE, G, "g1", principal="User:carol")


def test_deny_wins_and_does_not_imply(tmp_path: Path) -> None:
    a = authz(tmp_path, (T, "t", PRE, "User:alice", "*", Op.ALL, ALLOW),
              (T, "t-secret", LIT, "User:alice", "*", Op.READ, DENY),
              (T, "*", LIT, "User:*", "10.0.0.66", Op.ALL, DENY))
    assert ok(a, Op.READ, T, "t-1") and not ok(a, Op.READ, T, "t-secret")
    assert ok(a, Op.DESCRIBE, T, "t-secret")  # a DENY on READ does not deny DESCRIBE
    assert not ok(a, Op.DESCRIBE, T, "t-1", host="10.0.0.66")  # host match, ALL denies everything


def test_host_matching_and_super_users(tmp_path: Path) -> None:
    a = authz(tmp_path, (T, "t", LIT, "User:alice", "10.0.0.1", Op.READ, ALLOW), super_users=("User:admin",))
    assert ok(a, Op.READ, T, "t") and not ok(a, Op.READ, T, "t", host="10.0.0.2")
    assert ok(a, Op.ALTER, C, "kafka-cluster", principal="User:admin")


def test_authorize_by_resource_type(tmp_path: Path) -> None:
    a = authz(tmp_path, (T, "x", LIT, "User:alice", "*", Op.WRITE, ALLOW),
              (T, "y", LIT, "User:bob", "*", Op.WRITE, ALLOW), (T, "*", LIT, "User:bob", "*", Op.WRITE, DENY))
    assert a.authorize_by_resource_type("User:alice", "h", Op.WRITE, T)
    assert not a.authorize_by_resource_type("User:bob", "h", Op.WRITE, T)
    assert not a.authorize_by_resource_type("User:carol", "h", Op.WRITE, T)


def test_validation() -> None:
    for bad in [(G, "g", LIT, "User:a", "*", Op.WRITE, ALLOW),  # GROUP has no WRITE
                (C, "other", LIT, "User:a", "*", Op.ALTER, ALLOW),  # the cluster is kafka-cluster
                (T, "t", PatternType.MATCH, "User:a", "*", Op.READ, ALLOW),
                (T, "t", LIT, "alice", "*", Op.READ, ALLOW),  # principal without a type
                (T, "t", LIT, "User:a", "*", Op.ANY, ALLOW),
                (T, "t", LIT, "User:a", "*", Op.READ, AclPermissionType.ANY),
                (ResourceType.ANY, "t", LIT, "User:a", "*", Op.READ, ALLOW)]:
        with pytest.raises(AclError):
            make_binding(*bad)


def test_filters_and_persistence(tmp_path: Path) -> None:
    a = authz(tmp_path, (T, "pay-", PRE, "User:a", "*", Op.READ, ALLOW),
              (T, "pay-eu", LIT, "User:b", "*", Op.READ, DENY), (T, "*", LIT, "User:c", "*", Op.READ, ALLOW),
              (X, "tx", LIT, "User:a", "*", Op.WRITE, ALLOW))
    any_op, any_perm = Op.ANY, AclPermissionType.ANY

    def f(rt: ResourceType, name: str | None, pt: PatternType, principal: str | None = None) -> int:
        return len(a.acls(AclBindingFilter(rt, name, pt, principal, None, any_op, any_perm)))

    assert f(ResourceType.ANY, None, PatternType.ANY) == 4
    assert f(T, "pay-eu", PatternType.MATCH) == 3  # the literal, the prefix and the wildcard
    assert f(T, "pay-eu", PatternType.ANY) == 1  # exact name, any pattern type
    assert f(T, None, PRE) == 1 and f(ResourceType.ANY, None, PatternType.ANY, "User:a") == 2
    deleted = asyncio.run(a.delete_acls([AclBindingFilter(T, None, PatternType.ANY, None, None, any_op, DENY)]))
    assert [b.entry.principal for b in deleted[0]] == ["User:b"]
    doc = json.loads((tmp_path / "acls.json").read_text())
    assert doc["/kafka-acl-extended/prefixed/Topic/pay-"] == {"version": 1, "acls": [
        {"principal": "User:a", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
    assert "/kafka-acl/Topic/pay-eu" not in doc and "/kafka-acl/TransactionalId/tx" in doc
    again = AclAuthorizer(FileAclStore(tmp_path / "acls.json"))
    again.load()
    assert len(again.acls(AclBindingFilter(ResourceType.ANY, None, PatternType.ANY, None, None, any_op, any_perm))) == 3


def test_quota_entity_precedence(tmp_path: Path) -> None:
    q = ClientQuotaManager(FileQuotaStore(tmp_path / "q.json"), 11, 1)
    q.load()
    assert not q.enabled
    key = "producer_byte_rate"
    asyncio.run(q.alter([((None, DEFAULT), [(key, 1.0, False)])]))
    assert q.enabled and q._resolve(key, "User:alice", "c")
    for entity, value in [((None, "c"), 2.0), ((DEFAULT, None), 3.0), ((DEFAULT, DEFAULT), 4.0), ((DEFAULT, "c"), 5.0),
                          (("alice", None), 6.0), (("alice", DEFAULT), 7.0), (("alice", "c"), 8.0)]:
        asyncio.run(q.alter([(entity, [(key, value, False)])]))
        r = q._resolve(key, "User:alice", "c")
        assert r is not None and r.bound == value, (entity, r)
    r = q._resolve(key, "User:bob", "c")
    assert r is not None and r.bound == 5.0  # bob falls back to the <default> user + client c
    assert q._resolve("consumer_byte_rate", "User:alice", "c") is None
    with pytest.raises(QuotaError):
        q.validate([("bogus", 1.0, False)])
    reloaded = ClientQuotaManager(FileQuotaStore(tmp_path / "q.json"))
    reloaded.load()
    assert reloaded.configs == q.configs
    strict = q.describe([("user", 0, "alice")], strict=True)
    assert [e for e, _ in strict] == [[("user", "alice")]]
    assert len(q.describe([("user", 0, "alice")], strict=False)) == 3


def test_rate_and_throttle_time() -> None:
    r = Rate(11, 1000)
    for t in range(0, 10_000, 100):  # 1000 bytes every 100 ms for 10 s: 10 kB/s
        r.record(1000, float(t))
    assert r.measure(10_000.0) == pytest.approx(10_000, rel=0.1)
    q = ClientQuotaManager(FileQuotaStore(Path("/nonexistent/q.json")), 11, 1)
    q.configs = {(None, "c"): {"producer_byte_rate": 5000.0}}
    q._changed()
    throttle = 0
    for t in range(0, 10_000, 100):
        throttle = q.record("producer_byte_rate", "User:x", "c", 1000, now_ms=float(t))
    # at 10 kB/s against 5 kB/s over a ~10 s window: (10 - 5) / 5 * 10 s, bounded by the window
    assert 8000 <= throttle <= 11_000
