"""ACLs and quotas for authenticated principals: confluent-kafka clients log in over
SASL_PLAINTEXT as alice (PLAIN) and bob (SCRAM-SHA-256) and each meets its own ACLs and quotas.

The broker's PLAINTEXT listener is the admin path here (``User:ANONYMOUS`` is a super user
beside ``User:admin``); the clients under test only use the SASL listener.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.security import make_pki, scram_user, start_secure_broker

ck = pytest.importorskip("confluent_kafka")

AUTHZ = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
         "super.users": "User:admin;User:ANONYMOUS"}


def _samsa(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _client(sec: Any, user: str, password: str, mechanism: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": sec.addr(sec.sasl_plaintext), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password, **extra}


def _produce(conf: dict[str, Any], topic: str, n: int = 1) -> list[Any]:
    errors: list[Any] = []
    p = ck.Producer({**conf, "message.send.max.retries": 0})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), on_delivery=lambda err, _m: errors.append(err))
    p.flush(30)
    return errors


def test_principals_meet_their_acls_and_quotas(broker_factory: Any, tmp_path: Path) -> None:
    sec = start_secure_broker(broker_factory, make_pki(tmp_path / "pki"), **AUTHZ)
    admin = ["--bootstrap-server", sec.addr(sec.plaintext)]
    scram_user(sec.addr(sec.plaintext), "bob", "bob-secret")
    for t in ("alice-1", "shared"):
        _samsa("topics", *admin, "--create", "--topic", t, "--partitions", "1")
    _samsa("acls", *admin, "--add", "--allow-principal", "User:alice", "--producer", "--consumer",
           "--topic", "alice-", "--group", "alice-", "--resource-pattern-type", "prefixed")
    _samsa("acls", *admin, "--add", "--allow-principal", "User:bob", "--operation", "Read", "--operation", "Describe",
           "--topic", "shared")
    _samsa("acls", *admin, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "shared")

    alice = _client(sec, "alice", "alice-secret", "PLAIN")
    bob = _client(sec, "bob", "bob-secret", "SCRAM-SHA-256")
    TAF = ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _produce(alice, "alice-1") == [None]
    assert _produce(alice, "shared") == [None]
    assert [e.code() for e in _produce(bob, "shared")] == [TAF]  # bob may read "shared", not write it
    assert [e.code() for e in _produce(bob, "alice-1")] == [TAF]

    # bob reads "shared" but has no group: GROUP_AUTHORIZATION_FAILED; alice reads in her group
    c = ck.Consumer({**bob, "group.id": "bobs", "auto.offset.reset": "earliest"})
    c.subscribe(["shared"])
    err = None
    deadline = time.monotonic() + 20
    while err is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is not None:
            err = m.error()
    c.close()
    assert err is not None and err.code() == ck.KafkaError.GROUP_AUTHORIZATION_FAILED, err
    c = ck.Consumer({**alice, "group.id": "alice-readers", "auto.offset.reset": "earliest"})
    c.subscribe(["alice-1"])
    got = None
    deadline = time.monotonic() + 20
    while got is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got = m.value()
    c.close()
    assert got == b"v0"

    # Metadata as bob lists only what bob may DESCRIBE.
    from confluent_kafka.admin import AdminClient

    a = AdminClient(bob)
    topics = set(a.list_topics(timeout=15).topics)
    assert topics == {"shared"}, topics

    # A user quota holds alice, not the other principals.
    _samsa("configs", *admin, "--alter", "--entity-type", "users", "--entity-name", "alice",
           "--add-config", "producer_byte_rate=20000")
    throttled: list[float] = []
    p = ck.Producer({**alice, "linger.ms": 5, "throttle_cb": lambda ev: throttled.append(ev.throttle_time)})
    for _ in range(400):
        p.produce("alice-1", b"z" * 1000)
    p.flush(60)
    assert throttled and max(throttled) > 0
    anon_throttled: list[float] = []
    p = ck.Producer({"bootstrap.servers": sec.addr(sec.plaintext), "linger.ms": 5,
                     "throttle_cb": lambda ev: anon_throttled.append(ev.throttle_time)})
    for _ in range(400):
        p.produce("alice-1", b"z" * 1000)
    p.flush(60)
    assert not [t for t in anon_throttled if t > 0]
    log = sec.broker.log_text()
    assert "Principal = User:bob is Denied operation = WRITE" in log


def test_tools_take_command_config(broker_factory: Any, tmp_path: Path) -> None:
    """``--command-config`` as Kafka's tools take it: the samsa tools log in over SASL."""
    sec = start_secure_broker(broker_factory, make_pki(tmp_path / "pki"),
                              **{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                 "super.users": "User:admin"})
    sasl = ["--bootstrap-server", sec.addr(sec.sasl_plaintext)]
    admin_cfg = tmp_path / "admin.properties"
    admin_cfg.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                         "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
                         '    username="admin" password="admin-secret";\n')
    alice_cfg = tmp_path / "alice.properties"
    alice_cfg.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                         'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
                         'password="alice-secret";\n')
    # ANONYMOUS (PLAINTEXT, no command config) may not manage ACLs; admin over SASL may.
    anon = subprocess.run([sys.executable, "-m", "broker.cli", "acls", "--bootstrap-server",
                           sec.addr(sec.plaintext), "--list"], capture_output=True, text=True, timeout=60)
    assert anon.returncode == 1 and "ClusterAuthorization" in anon.stderr, anon.stderr
    _samsa("topics", *sasl, "--command-config", str(admin_cfg), "--create", "--topic", "cc", "--partitions", "1")
    _samsa("acls", *sasl, "--command-config", str(admin_cfg), "--add", "--allow-principal", "User:alice",
           "--producer", "--consumer", "--topic", "cc", "--group", "cc-g")
    assert "User:alice" in _samsa("acls", *sasl, "--command-config", str(admin_cfg), "--list", "--topic", "cc")
    proc = subprocess.run([sys.executable, "-m", "broker.cli", "console-producer", *sasl, "--command-config",
                           str(alice_cfg), "--topic", "cc"], input="hello\nworld\n", capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = _samsa("console-consumer", *sasl, "--command-config", str(alice_cfg), "--topic", "cc", "--group", "cc-g",
                 "--from-beginning", "--max-messages", "2", "--timeout-ms", "20000")
    assert out.split() == ["hello", "world"]
