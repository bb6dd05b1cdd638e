"""ACLs in a cluster live in ZooKeeper (``/kafka-acl/...``, Kafka's layout): an ACL created
through any broker reaches every broker (``/kafka-acl-changes`` notifications) and is enforced
by the leaders wherever they are. Client quotas and IP connection-rate quotas (``/config/users``,
``/config/clients``, ``/config/ips``) are shared the same way (``/config/changes``).

The brokers run with ``allow.everyone.if.no.acl.found=true`` so that their own PLAINTEXT
inter-broker requests (as ``User:ANONYMOUS``) stay allowed; the test's ACLs are on one topic.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka import KafkaProducer
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
from kafka.errors import TopicAuthorizationFailedError
from kafka.protocol.admin import DescribeAclsRequest, DescribeAclsResponse

from tests.support.rawclient import RawClient

pytestmark = pytest.mark.timeout(300)

AUTHZ = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "allow.everyone.if.no.acl.found": "true"}


def _acl_count(broker: Any) -> int:
    """How many ACLs this one broker holds (DescribeAcls answered from its own authorizer)."""
    with RawClient(broker.host, broker.port) as rc:
        req = DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                  principal_filter=None, host_filter=None, operation=1, permission_type=1)
        resp = rc.roundtrip(req, 1, DescribeAclsResponse)
        assert resp.error_code == 0, resp
        return sum(len(r.acls) for r in resp.resources)


def _wait_all(cluster: Any, n: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    counts: list[int] = []
    while time.monotonic() < deadline:
        counts = [_acl_count(b) for b in cluster.brokers]
        if counts == [n] * len(cluster.brokers):
            return
        time.sleep(0.2)
    raise AssertionError(f"ACL counts per broker {counts}, expected {n} on each")


def test_acls_are_shared_through_zookeeper(cluster_factory: Any) -> None:
    cluster = cluster_factory(3, overrides=AUTHZ)
    cluster.wait_for_brokers(3)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic("locked", 3, 3), NewTopic("open", 3, 3)])
        deny = ACL("User:ANONYMOUS", "*", ACLOperation.WRITE, ACLPermissionType.DENY,
                   ResourcePattern(ResourceType.TOPIC, "locked", ACLResourcePatternType.LITERAL))
        assert not admin.create_acls([deny])["failed"]
        _wait_all(cluster, 1)

        p = KafkaProducer(bootstrap_servers=cluster.bootstrap, retries=0, max_block_ms=20000, acks="all")
        try:
            for part in range(3):  # every leader, wherever it is, refuses
                with pytest.raises(TopicAuthorizationFailedError):
                    p.send("locked", b"no", partition=part).get(timeout=30)
            for part in range(3):
                p.send("open", b"yes", partition=part).get(timeout=30)
        finally:
            p.close()

        admin.delete_acls([ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                     ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))])
        _wait_all(cluster, 0)
        p = KafkaProducer(bootstrap_servers=cluster.bootstrap, retries=3, max_block_ms=20000, acks="all")
        try:
            for part in range(3):
                p.send("locked", b"now", partition=part).get(timeout=30)
        finally:
            p.close()
    finally:
        admin.close()
    # A restarted broker reads the ACLs from ZooKeeper, not from a local file.
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20000)
    try:
        admin.create_acls([ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                               ResourcePattern(ResourceType.GROUP, "g", ACLResourcePatternType.PREFIXED))])
    finally:
        admin.close()
    _wait_all(cluster, 1)
    cluster.restart(2)
    assert _acl_count(cluster[2]) == 1
    assert not (cluster[2].data_dir / "samsa-acls.json").exists()


def _quota_entities(broker: Any) -> int:
    from kafka.protocol.admin import DescribeClientQuotasRequest, DescribeClientQuotasResponse

    with RawClient(broker.host, broker.port) as rc:
        req = DescribeClientQuotasRequest(components=[], strict=False)
        resp = rc.roundtrip(req, 0, DescribeClientQuotasResponse)
        assert resp.error_code == 0, resp
        return len(resp.entries or [])


def test_client_quotas_are_shared_through_zookeeper(cluster_factory: Any) -> None:
    import subprocess
    import sys

    from kafka.protocol.metadata import MetadataRequest, MetadataResponse

    cluster = cluster_factory(3)
    cluster.wait_for_brokers(3)
    out = subprocess.run([sys.executable, "-m", "broker.cli", "configs", "--bootstrap-server", cluster[0].bootstrap,
                          "--alter", "--entity-type", "clients", "--entity-name", "busy", "--add-config",
                          "request_percentage=0.01"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    deadline = time.monotonic() + 30
    while [_quota_entities(b) for b in cluster.brokers] != [1, 1, 1] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [_quota_entities(b) for b in cluster.brokers] == [1, 1, 1]
    with RawClient(cluster[2].host, cluster[2].port, client_id="busy") as rc:  # enforced on another broker
        req = MetadataRequest(topics=None, allow_auto_topic_creation=False)
        assert any(rc.roundtrip(req, 9, MetadataResponse).throttle_time_ms > 0 for _ in range(200))
    cluster.restart(1)
    assert _quota_entities(cluster[1]) == 1
    assert not (cluster[1].data_dir / "samsa-quotas.json").exists()


def test_ip_quota_set_through_one_broker_is_enforced_by_another(cluster3: Any) -> None:
    """KIP-612 in ZooKeeper mode: ``/config/ips/<ip>`` with a ``/config/changes`` notice; every
    broker reloads it and closes that address's connections past the rate."""
    import json
    import subprocess
    import sys

    from kazoo.client import KazooClient

    from tests.support.net import connection_burst

    def tool(*args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "broker.cli", "configs", "--bootstrap-server",
                              cluster3[0].bootstrap, "--entity-type", "ips", "--entity-name", "127.0.0.2", *args],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def ip_entities(broker: Any) -> int:
        from kafka.protocol.admin import DescribeClientQuotasRequest, DescribeClientQuotasResponse

        with RawClient(broker.host, broker.port) as rc:
            req = DescribeClientQuotasRequest(
                components=[DescribeClientQuotasRequest.ComponentData(entity_type="ip", match_type=2, match=None)],
                strict=False)
            resp = rc.roundtrip(req, 1, DescribeClientQuotasResponse)
            assert resp.error_code == 0, resp
            return len(resp.entries or [])

    tool("--alter", "--add-config", "connection_creation_rate=1")
    try:
        zk = KazooClient(hosts=cluster3.zookeeper_connect, timeout=10.0)
        zk.start()
        try:
            data, _ = zk.get("/config/ips/127.0.0.2")
        finally:
            zk.stop()
            zk.close()
        assert json.loads(data) == {"version": 1, "config": {"connection_creation_rate": "1"}}
        deadline = time.monotonic() + 30
        while [ip_entities(b) for b in cluster3.brokers] != [1, 1, 1] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [ip_entities(b) for b in cluster3.brokers] == [1, 1, 1]
        # Kafka's 11 one-second windows: a fresh address gets ~10 connections, then 1/s
        got = connection_burst(cluster3[2].port, ["127.0.0.2", "127.0.0.1"], 1.5, every=0.03)
        print(f"broker 2, 127.0.0.2 at 1/s: {got['127.0.0.2'].count('ok')} of {len(got['127.0.0.2'])} served")
        assert 0 < got["127.0.0.2"].count("ok") <= 14 < len(got["127.0.0.2"])
        assert got["127.0.0.1"] == ["ok"] * len(got["127.0.0.1"])
        assert "Throttled connection from /127.0.0.2" in cluster3[2].log_text()
    finally:
        tool("--alter", "--delete-config", "connection_creation_rate")
        deadline = time.monotonic() + 30
        while any(ip_entities(b) for b in cluster3.brokers) and time.monotonic() < deadline:
            time.sleep(0.2)
