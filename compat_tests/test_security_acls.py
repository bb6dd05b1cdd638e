"""ACLs with stock clients: kafka-python's and confluent-kafka's admin clients manage them, and
producers / consumers meet them, against a real broker subprocess.

Principals: until SASL lands every connection here is ``User:ANONYMOUS``; the tests grant and
deny that principal, starting the broker as a super user to seed ``ALTER`` on the cluster
(so ACLs can then be managed at runtime without being a super user).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import (
    GroupAuthorizationFailedError,
    KafkaTimeoutError,
    SecurityDisabledError,
    TopicAuthorizationFailedError,
)

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
ANON = "User:ANONYMOUS"
ALL_ACLS = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                     ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))


def acl(op: ACLOperation, rtype: ResourceType, name: str, pattern: ACLResourcePatternType = ACLResourcePatternType.LITERAL,
        perm: ACLPermissionType = ACLPermissionType.ALLOW, principal: str = ANON, host: str = "*") -> ACL:
    return ACL(principal, host, op, perm, ResourcePattern(rtype, name, pattern))


def admin(b: Any) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=10000)


@pytest.fixture
def secured(broker_factory: Any) -> Any:
    """A broker with the authorizer on, where ANONYMOUS may manage ACLs (ALTER/DESCRIBE on the
    cluster) and create topics, but nothing else until a test grants it."""
    b = broker_factory({**AUTHORIZER, "super.users": ANON})
    a = admin(b)
    res = a.create_acls([acl(ACLOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster"),
                         acl(ACLOperation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"),
                         acl(ACLOperation.CREATE, ResourceType.CLUSTER, "kafka-cluster")])
    assert not res["failed"], res
    a.close()
    b.overrides.pop("super.users")
    b.restart()  # the ACLs above were persisted
    return b


def test_no_authorizer_answers_security_disabled(broker: Any) -> None:
    a = admin(broker)
    try:
        with pytest.raises(SecurityDisabledError):
            a.describe_acls(ALL_ACLS)
        res = a.create_acls([acl(ACLOperation.READ, ResourceType.TOPIC, "t")])
        assert res["succeeded"] == [] and len(res["failed"]) == 1
    finally:
        a.close()


def test_kafka_python_admin_create_describe_delete(secured: Any) -> None:
    a = admin(secured)
    try:
        wanted = [acl(ACLOperation.READ, ResourceType.TOPIC, "orders"),
                  acl(ACLOperation.WRITE, ResourceType.TOPIC, "pub-", ACLResourcePatternType.PREFIXED),
                  acl(ACLOperation.READ, ResourceType.GROUP, "*"),
                  acl(ACLOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "tx", principal="User:alice", host="10.0.0.1"),
                  acl(ACLOperation.DESCRIBE, ResourceType.TOPIC, "orders", perm=ACLPermissionType.DENY,
                      principal="User:bob")]
        res = a.create_acls(wanted)
        assert not res["failed"] and len(res["succeeded"]) == 5
        # An invalid binding is refused on its own: GROUP does not support WRITE.
        bad = a.create_acls([acl(ACLOperation.WRITE, ResourceType.GROUP, "g")])
        assert len(bad["failed"]) == 1 and not bad["succeeded"]

        acls, _ = a.describe_acls(ALL_ACLS)
        assert len(acls) == 3 + 5  # the fixture's three cluster ACLs and ours
        # MATCH: every pattern that applies to topic pub-1 (the PREFIXED one).
        match, _ = a.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                             ResourcePatternFilter(ResourceType.TOPIC, "pub-1",
                                                                   ACLResourcePatternType.MATCH)))
        assert [(x.resource_pattern.resource_name, x.operation) for x in match] == [("pub-", ACLOperation.WRITE)]
        by_principal, _ = a.describe_acls(ACLFilter("User:bob", None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                    ResourcePatternFilter(ResourceType.ANY, None,
                                                                          ACLResourcePatternType.ANY)))
        assert len(by_principal) == 1 and by_principal[0].permission_type == ACLPermissionType.DENY

        # Delete by filter: every TOPIC ACL, whatever its pattern type.
        deleted = a.delete_acls([ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                           ResourcePatternFilter(ResourceType.TOPIC, None,
                                                                 ACLResourcePatternType.ANY))])
        ((_flt, matched, err),) = deleted
        assert len(matched) == 3, matched
        left, _ = a.describe_acls(ALL_ACLS)
        assert len(left) == 5
    finally:
        a.close()
    # Persisted: a restart keeps exactly what is left.
    secured.restart()
    a = admin(secured)
    try:
        again, _ = a.describe_acls(ALL_ACLS)
        assert len(again) == 5
    finally:
        a.close()


def test_confluent_admin_create_describe_delete(secured: Any) -> None:
    ck = pytest.importorskip("confluent_kafka.admin")
    a = ck.AdminClient({"bootstrap.servers": secured.bootstrap})
    b1 = ck.AclBinding(ck.ResourceType.TOPIC, "c-topic", ck.ResourcePatternType.LITERAL, ANON, "*",
                       ck.AclOperation.READ, ck.AclPermissionType.ALLOW)
    b2 = ck.AclBinding(ck.ResourceType.GROUP, "c-", ck.ResourcePatternType.PREFIXED, "User:carol", "*",
                       ck.AclOperation.DESCRIBE, ck.AclPermissionType.DENY)
    for f in a.create_acls([b1, b2], request_timeout=10).values():
        assert f.result(timeout=15) is None
    flt = ck.AclBindingFilter(ck.ResourceType.ANY, None, ck.ResourcePatternType.ANY, None, None,
                              ck.AclOperation.ANY, ck.AclPermissionType.ANY)
    got = a.describe_acls(flt, request_timeout=10).result(timeout=15)
    names = sorted(b.name for b in got)
    assert names == ["c-", "c-topic", "kafka-cluster", "kafka-cluster", "kafka-cluster"], names
    group_filter = ck.AclBindingFilter(ck.ResourceType.GROUP, None, ck.ResourcePatternType.ANY, None, None,
                                       ck.AclOperation.ANY, ck.AclPermissionType.ANY)
    res = a.delete_acls([group_filter], request_timeout=10)
    (deleted,) = [f.result(timeout=15) for f in res.values()]
    assert [(d.name, d.principal, d.permission_type) for d in deleted] == \
        [("c-", "User:carol", ck.AclPermissionType.DENY)]
    assert len(a.describe_acls(flt, request_timeout=10).result(timeout=15)) == 4


def _end_offset(b: Any, topic: str) -> int:
    c = KafkaConsumer(bootstrap_servers=b.bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        return int(c.end_offsets([tp])[tp])
    finally:
        c.close()


def test_producer_and_consumer_meet_the_acls(secured: Any) -> None:
    a = admin(secured)
    try:
        a.create_topics([NewTopic("open", 1, 1), NewTopic("closed", 1, 1), NewTopic("pub-secret", 1, 1)])
        # ANONYMOUS may write "open" and every pub-* topic except pub-secret (DENY wins), read
        # and describe "open", and read the group "g".
        res = a.create_acls([acl(ACLOperation.WRITE, ResourceType.TOPIC, "open"),
                             acl(ACLOperation.READ, ResourceType.TOPIC, "open"),
                             acl(ACLOperation.WRITE, ResourceType.TOPIC, "pub-", ACLResourcePatternType.PREFIXED),
                             acl(ACLOperation.WRITE, ResourceType.TOPIC, "pub-secret", perm=ACLPermissionType.DENY),
                             acl(ACLOperation.DESCRIBE, ResourceType.TOPIC, "closed"),
                             acl(ACLOperation.READ, ResourceType.GROUP, "g")])
        assert not res["failed"]
        # Metadata lists only what ANONYMOUS may DESCRIBE (WRITE/READ imply it).
        listed = sorted(t["name"] for t in a.describe_topics())
        assert listed == ["closed", "open", "pub-secret"], listed  # a DENY on WRITE leaves DESCRIBE
    finally:
        a.close()

    p = KafkaProducer(bootstrap_servers=secured.bootstrap, retries=0, max_block_ms=10000)
    try:
        p.send("open", b"ok").get(timeout=30)
        with pytest.raises(TopicAuthorizationFailedError):
            p.send("closed", b"nope").get(timeout=30)
        with pytest.raises(TopicAuthorizationFailedError):
            p.send("pub-secret", b"nope").get(timeout=30)
    finally:
        p.close()
    assert _end_offset(secured, "open") == 1
    assert _end_offset(secured, "closed") == 0  # nothing written

    c = KafkaConsumer("open", bootstrap_servers=secured.bootstrap, group_id="g", auto_offset_reset="earliest",
                      consumer_timeout_ms=15000)
    try:
        assert next(iter(c)).value == b"ok"
        c.commit()
    finally:
        c.close()
    denied = KafkaConsumer("open", bootstrap_servers=secured.bootstrap, group_id="other",
                           auto_offset_reset="earliest", consumer_timeout_ms=5000)
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            for _ in range(50):
                denied.poll(timeout_ms=200)
    finally:
        denied.close()

    # Revoking is in force at once: the next produce to "open" is refused.
    a = admin(secured)
    try:
        a.delete_acls([ACLFilter(ANON, None, ACLOperation.WRITE, ACLPermissionType.ALLOW,
                                 ResourcePatternFilter(ResourceType.TOPIC, "open", ACLResourcePatternType.LITERAL))])
    finally:
        a.close()
    p = KafkaProducer(bootstrap_servers=secured.bootstrap, retries=0, max_block_ms=10000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            p.send("open", b"late").get(timeout=30)
    finally:
        p.close()
    assert _end_offset(secured, "open") == 1
    deadline = time.monotonic() + 10
    while "is Denied operation = WRITE" not in secured.log_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "Principal = User:ANONYMOUS is Denied operation = WRITE" in secured.log_text()


def _samsa(*args: str, check: bool = True) -> Any:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True, timeout=60)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_samsa_acls_tool(secured: Any) -> None:
    """``samsa acls`` as kafka-acls.sh: --add with shortcuts, --list, --remove; then enforced."""
    bs = ["--bootstrap-server", secured.bootstrap]
    out = _samsa("acls", *bs, "--add", "--allow-principal", ANON, "--producer", "--topic", "tool-",
                 "--resource-pattern-type", "prefixed").stdout
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=tool-, patternType=PREFIXED)`" in out
    assert "(principal=User:ANONYMOUS, host=*, operation=WRITE, permissionType=ALLOW)" in out
    _samsa("acls", *bs, "--add", "--deny-principal", ANON, "--operation", "Write", "--topic", "tool-x")
    listed = _samsa("acls", *bs, "--list", "--topic", "tool-x", "--resource-pattern-type", "match").stdout
    assert "name=tool-, patternType=PREFIXED" in listed and "name=tool-x, patternType=LITERAL" in listed
    assert "operation=DENY" not in listed and "permissionType=DENY" in listed

    p = KafkaProducer(bootstrap_servers=secured.bootstrap, retries=0, max_block_ms=10000)
    try:
        p.send("tool-a", b"ok").get(timeout=30)  # auto-created: --producer grants CREATE
        with pytest.raises(TopicAuthorizationFailedError):
            p.send("tool-x", b"nope").get(timeout=30)  # DENY wins over the PREFIXED ALLOW
    finally:
        p.close()

    rm = _samsa("acls", *bs, "--remove", "--deny-principal", ANON, "--operation", "Write", "--topic", "tool-x").stdout
    assert "Removing ACLs" in rm
    assert _samsa("acls", *bs, "--remove", "--topic", "tool-", "--resource-pattern-type", "prefixed",
                  check=False).returncode == 1  # removing everything needs --force
    _samsa("acls", *bs, "--remove", "--topic", "tool-", "--resource-pattern-type", "prefixed", "--force")
    assert "tool-" not in _samsa("acls", *bs, "--list").stdout


def test_denials_go_to_the_authorizer_log_file(broker_factory: Any, tmp_path: Any) -> None:
    log_file = tmp_path / "kafka-authorizer.log"
    b = broker_factory({**AUTHORIZER, "authorizer.log.file": str(log_file)})
    c = KafkaConsumer(bootstrap_servers=b.bootstrap, request_timeout_ms=10000)
    try:
        assert c.topics() == set()  # nothing is DESCRIBE-able without ACLs
    finally:
        c.close()
    p = KafkaProducer(bootstrap_servers=b.bootstrap, retries=0, max_block_ms=5000)
    try:
        with pytest.raises((TopicAuthorizationFailedError, KafkaTimeoutError)):  # no metadata for "secret"
            p.send("secret", b"x").get(timeout=10)
    finally:
        p.close()
    deadline = time.monotonic() + 10
    while "secret" not in (log_file.read_text() if log_file.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.1)
    text = log_file.read_text()
    assert "Principal = User:ANONYMOUS is Denied operation = DESCRIBE" in text and "TOPIC:LITERAL:secret" in text
    assert "is Denied" not in b.log_text()  # not in the server log
