"""Principals as the authorizer sees them, and the samsa tools over secured listeners (issue 10).

With an ACL authorizer on and ``super.users=User:alice;User:admin``: a client presenting the
certificate ``CN=alice,OU=eng,O=Samsa`` on the SSL listener is ``User:alice`` through
``ssl.principal.mapping.rules`` and may create topics; the same listener without a certificate is
``User:ANONYMOUS`` and may not; ``samsa`` tools with ``--command-config`` (SASL_SSL, PLAIN admin)
create topics, produce, consume and manage SCRAM users, and fail on the PLAINTEXT listener.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError

from tests.support.security import make_pki, start_secure_broker


@pytest.fixture
def sec(broker_factory, tmp_path):
    pki = make_pki(tmp_path / "pki")
    sb = start_secure_broker(broker_factory, pki, **{
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:alice;User:admin",
        "listener.name.ssl.ssl.client.auth": "requested",
        "ssl.principal.mapping.rules": "RULE:^CN=([a-z]+),OU=eng,O=Samsa$/$1/,DEFAULT"})
    sb.pki = pki  # type: ignore[attr-defined]
    client_props = tmp_path / "admin.properties"
    client_props.write_text(
        "security.protocol=SASL_SSL\n"
        f"ssl.truststore.location={pki.ca}\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    username="admin" password="admin-secret";\n')
    sb.client_props = client_props  # type: ignore[attr-defined]
    return sb


def _create(sec, topic: str, **ssl_kw: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=sec.addr(sec.ssl), security_protocol="SSL",
                             ssl_cafile=str(sec.pki.ca), **ssl_kw)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()


def test_client_certificate_principal_meets_super_users(sec):
    _create(sec, "by-alice", ssl_certfile=str(sec.pki.client_crt), ssl_keyfile=str(sec.pki.client_key))
    with pytest.raises(KafkaError, match="AuthorizationFailed"):
        _create(sec, "by-anonymous")


def samsa(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker.tools", *args], capture_output=True, text=True, timeout=120)


def test_tools_take_command_config(sec):
    b = ["--bootstrap-server", sec.addr(sec.sasl_ssl), "--command-config", str(sec.client_props)]
    out = samsa("topics", *b, "--create", "--topic", "tooling", "--partitions", "1")
    assert out.returncode == 0, out.stdout + out.stderr
    out = subprocess.run([sys.executable, "-m", "broker.tools", "console-producer", *b, "--topic", "tooling"],
                         input="one\ntwo\n", capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    out = samsa("console-consumer", *b, "--topic", "tooling", "--from-beginning", "--max-messages", "2")
    assert out.stdout.split() == ["one", "two"], out.stderr
    out = samsa("configs", *b, "--alter", "--entity-type", "users", "--entity-name", "dora",
                "--add-config", "SCRAM-SHA-256=[password=dora-secret]")
    assert out.returncode == 0 and "Completed updating config for user dora." in out.stdout, out.stdout + out.stderr
    # the same as User:ANONYMOUS on PLAINTEXT: refused by the authorizer
    out = samsa("configs", "--bootstrap-server", sec.addr(sec.plaintext), "--alter", "--entity-type", "users",
                "--entity-name", "eve", "--add-config", "SCRAM-SHA-256=[password=x]")
    assert out.returncode != 0 and "AUTHORIZATION_FAILED" in (out.stdout + out.stderr), out.stdout + out.stderr


def test_failed_authentication_is_answered_after_the_delay(sec):
    """connection.failed.authentication.delay.ms (default 100, KIP-306) slows password guessing."""
    import time

    from tests.security.test_sasl_protocol import SASL_AUTHENTICATION_FAILED, Conn

    c = Conn(sec.sasl_plaintext)
    assert c.handshake("PLAIN").error_code == 0
    t0 = time.monotonic()
    r = c.authenticate(b"\0alice\0guess")
    assert r.error_code == SASL_AUTHENTICATION_FAILED and time.monotonic() - t0 >= 0.1
    assert c.closed()
    assert Conn(sec.sasl_plaintext).plain("alice", "alice-secret").error_code == 0
