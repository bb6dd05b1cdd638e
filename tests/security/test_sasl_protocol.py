"""SASL on the wire, frame by frame, against a subprocess broker (issue 10).

A raw socket client (kafka-python's message classes as the codec, kafka-python's own SCRAM
client for the exchange) checks what Kafka's SaslServerAuthenticator does: only ApiVersions,
SaslHandshake and SaslAuthenticate before authentication (anything else closes), the v0
unframed form, UNSUPPORTED_SASL_MECHANISM with the enabled list, SASL_AUTHENTICATION_FAILED
with a message then close, SCRAM with a wrong nonce or proof, truncated and oversized SASL
frames, many failed logins while an authenticated client keeps working, KIP-368
session_lifetime_ms and re-authentication, and SCRAM credential management (keys 50/51, also
through confluent-kafka's AdminClient, which sends an empty users array to describe all).
"""

from __future__ import annotations

import base64
import socket
import ssl
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka.net.sasl.scram import ScramClient
from kafka.protocol.admin import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from broker.security.scram import salted_password
from tests.support.net import recv_frame
from tests.support.security import make_pki, scram_user, start_secure_broker

SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE = 58, 33, 34


class Conn:
    def __init__(self, port: int, tls: Path | None = None) -> None:
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        if tls is not None:
            ctx = ssl.create_default_context(cafile=str(tls))
            raw = ctx.wrap_socket(raw, server_hostname="localhost")
        self.sock = raw
        self.corr = 0

    def send(self, request, version: int) -> None:
        self.corr += 1
        request.with_header(correlation_id=self.corr, client_id="sec-test")
        self.sock.sendall(request.encode(version=version, header=True, framed=True))

    def rt(self, request, version: int, response_cls):
        self.send(request, version)
        return response_cls.decode(recv_frame(self.sock), version=version, header=True)

    def closed(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def handshake(self, mechanism: str, version: int = 1):
        return self.rt(SaslHandshakeRequest(mechanism=mechanism), version, SaslHandshakeResponse)

    def authenticate(self, token: bytes, version: int = 2):
        return self.rt(SaslAuthenticateRequest(auth_bytes=token), version, SaslAuthenticateResponse)

    def plain(self, user: str, password: str):
        assert self.handshake("PLAIN").error_code == 0
        return self.authenticate(f"\0{user}\0{password}".encode())

    def scram(self, user: str, password: str, mechanism: str = "SCRAM-SHA-256"):
        assert self.handshake(mechanism).error_code == 0
        client = ScramClient(user, password, mechanism)
        r1 = self.authenticate(client.first_message())
        assert r1.error_code == 0, r1.error_message
        client.process_server_first_message(r1.auth_bytes)
        return self.authenticate(client.final_message())

    def metadata(self):
        return self.rt(MetadataRequest(topics=[], allow_auto_topic_creation=False), 4, MetadataResponse)


@pytest.fixture
def sec(broker_factory, tmp_path):
    pki = make_pki(tmp_path / "pki")
    sb = start_secure_broker(broker_factory, pki, **{"connections.max.reauth.ms": "10000",
                                                            "connection.failed.authentication.delay.ms": "0"})
    scram_user(sb.addr(sb.plaintext), "bob", "bob-secret", "SCRAM-SHA-256")
    scram_user(sb.addr(sb.plaintext), "bob", "bob-secret", "SCRAM-SHA-512", iterations=8192)
    sb.pki = pki  # type: ignore[attr-defined]
    return sb


def test_plain_and_scram_succeed_and_carry_session_lifetime(sec):
    c = Conn(sec.sasl_plaintext)
    r = c.plain("alice", "alice-secret")
    assert (r.error_code, r.session_lifetime_ms) == (0, 10000)
    assert c.metadata().brokers[0].port == sec.sasl_plaintext  # the listener's own address
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        c = Conn(sec.sasl_ssl, tls=sec.pki.ca)
        r = c.scram("bob", "bob-secret", mech)
        assert r.error_code == 0, r.error_message
        assert r.auth_bytes.startswith(b"v=")
        assert c.metadata().brokers[0].port == sec.sasl_ssl


def test_requests_before_authentication_close_the_connection(sec):
    c = Conn(sec.sasl_plaintext)
    c.send(MetadataRequest(topics=[], allow_auto_topic_creation=False), 4)
    assert c.closed()
    c = Conn(sec.sasl_plaintext)  # after a handshake, still not authenticated
    assert c.handshake("PLAIN").error_code == 0
    c.send(MetadataRequest(topics=[], allow_auto_topic_creation=False), 4)
    assert c.closed()


def test_unknown_mechanism_lists_the_enabled_ones_then_closes(sec):
    c = Conn(sec.sasl_plaintext)
    r = c.handshake("GSSAPI")
    assert r.error_code == UNSUPPORTED_SASL_MECHANISM
    assert r.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert c.closed()


def test_wrong_password_fails_with_message_then_closes(sec):
    c = Conn(sec.sasl_plaintext)
    r = c.plain("alice", "nope")
    assert r.error_code == SASL_AUTHENTICATION_FAILED
    assert r.error_message == "Authentication failed: Invalid username or password"
    assert c.closed()
    for user, pw in (("bob", "nope"), ("nobody", "bob-secret")):
        c = Conn(sec.sasl_plaintext)
        r = c.scram(user, pw)
        assert r.error_code == SASL_AUTHENTICATION_FAILED
        assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in r.error_message
        assert c.closed()
    log = sec.broker.log_text()
    assert "nope" not in log and "bob-secret" not in log and "alice-secret" not in log.split("--override")[-1]


def test_scram_wrong_nonce_and_wrong_proof(sec):
    for tamper in ("nonce", "proof"):
        c = Conn(sec.sasl_plaintext)
        assert c.handshake("SCRAM-SHA-256").error_code == 0
        client = ScramClient("bob", "bob-secret", "SCRAM-SHA-256")
        r1 = c.authenticate(client.first_message())
        client.process_server_first_message(r1.auth_bytes)
        final = client.final_message().decode()
        if tamper == "nonce":  # the server's part of the nonce altered
            head, rest = final.split(",r=", 1)
            nonce, tail = rest.split(",", 1)
            final = f"{head},r={nonce[:-1]}{'0' if nonce[-1] != '0' else '1'},{tail}"
        else:
            proof = bytearray(base64.b64decode(final.split(",p=")[1]))
            proof[0] ^= 1
            final = final.split(",p=")[0] + ",p=" + base64.b64encode(bytes(proof)).decode()
        r = c.authenticate(final.encode())
        assert r.error_code == SASL_AUTHENTICATION_FAILED
        assert ("nonces do not match" in r.error_message) == (tamper == "nonce"), r.error_message
        assert c.closed()


def test_handshake_v0_then_unframed_tokens(sec):
    c = Conn(sec.sasl_plaintext)
    assert c.handshake("PLAIN", version=0).error_code == 0
    token = b"\0alice\0alice-secret"
    c.sock.sendall(struct.pack(">i", len(token)) + token)
    assert recv_frame(c.sock) == b""  # PLAIN's empty server token, size-prefixed only
    assert c.metadata().brokers  # authenticated
    c = Conn(sec.sasl_plaintext)  # SCRAM, unframed
    assert c.handshake("SCRAM-SHA-512", version=0).error_code == 0
    client = ScramClient("bob", "bob-secret", "SCRAM-SHA-512")
    first = client.first_message()
    c.sock.sendall(struct.pack(">i", len(first)) + first)
    client.process_server_first_message(recv_frame(c.sock))
    final = client.final_message()
    c.sock.sendall(struct.pack(">i", len(final)) + final)
    client.process_server_final_message(recv_frame(c.sock))  # verifies the server signature
    assert c.metadata().brokers


def test_truncated_and_oversized_sasl_frames(sec):
    c = Conn(sec.sasl_plaintext)
    assert c.handshake("PLAIN").error_code == 0
    c.sock.sendall(struct.pack(">ihhi", 8, 36, 2, 99))  # header cut short
    assert c.closed()
    c = Conn(sec.sasl_plaintext)
    c.sock.sendall(struct.pack(">i", 200 * 1024 * 1024))  # beyond socket.request.max.bytes
    assert c.closed()
    c = Conn(sec.sasl_plaintext)
    assert c.plain("alice", "alice-secret").error_code == 0


def test_many_failed_logins_leave_the_broker_serving(sec):
    ok = Conn(sec.sasl_plaintext)
    assert ok.plain("alice", "alice-secret").error_code == 0
    t0 = time.monotonic()
    for i in range(1000):
        c = Conn(sec.sasl_plaintext)
        r = c.plain("alice", f"wrong-{i}")
        assert r.error_code == SASL_AUTHENTICATION_FAILED
        c.sock.close()
        if i % 100 == 0:  # the authenticated connection is served throughout (re-authenticating
            assert ok.plain("alice", "alice-secret").error_code == 0  # within the fixture's 10 s sessions)
            assert ok.metadata().brokers
    assert ok.plain("alice", "alice-secret").error_code == 0
    assert ok.metadata().brokers  # the authenticated connection still works
    assert Conn(sec.sasl_plaintext).plain("alice", "alice-secret").error_code == 0
    assert time.monotonic() - t0 < 120


def test_reauthentication_and_expiry(sec):
    c = Conn(sec.sasl_plaintext)
    assert c.plain("alice", "alice-secret").session_lifetime_ms == 10000
    assert c.plain("alice", "alice-secret").error_code == 0  # KIP-368: re-authenticate in place
    assert c.metadata().brokers
    r = Conn(sec.sasl_plaintext)
    assert r.plain("alice", "alice-secret").error_code == 0
    bad = r.plain("admin", "admin-secret")  # a re-authentication may not change the principal
    assert bad.error_code == SASL_AUTHENTICATION_FAILED and "Cannot change principals" in bad.error_message
    assert r.closed()
    e = Conn(sec.sasl_plaintext)
    assert e.plain("alice", "alice-secret").error_code == 0
    time.sleep(10.5)  # the session has expired: only re-authentication is allowed now
    e.send(MetadataRequest(topics=[], allow_auto_topic_creation=False), 4)
    assert e.closed()


def test_sasl_requests_on_a_plaintext_listener_are_illegal(sec):
    c = Conn(sec.plaintext)
    assert c.handshake("PLAIN").error_code == ILLEGAL_SASL_STATE
    assert c.metadata().brokers[0].port == sec.plaintext


def test_scram_credentials_describe_alter_and_cli(sec):
    c = Conn(sec.plaintext)
    d = c.rt(DescribeUserScramCredentialsRequest(users=None), 0, DescribeUserScramCredentialsResponse)
    bob = {r.user: r for r in d.results}["bob"]
    assert sorted((i.mechanism, i.iterations) for i in bob.credential_infos) == [(1, 4096), (2, 8192)]
    d = c.rt(DescribeUserScramCredentialsRequest(users=[("ghost",)]), 0, DescribeUserScramCredentialsResponse)
    assert d.results[0].error_code == 91  # RESOURCE_NOT_FOUND
    salt = b"0123456789abcdef"
    sp = salted_password("SCRAM-SHA-256", "x", salt, 4096)
    a = c.rt(AlterUserScramCredentialsRequest(deletions=[("ghost", 1)], upsertions=[
        ("carol", 1, 1000, salt, sp), ("dave", 0, 4096, salt, sp), ("erin", 1, 4096, salt, sp)]),
        0, AlterUserScramCredentialsResponse)
    codes = {r.user: r.error_code for r in a.results}
    assert codes == {"ghost": 91, "carol": 93, "dave": 33, "erin": 0}
    assert Conn(sec.sasl_plaintext).scram("erin", "x").error_code == 0
    # stored salted: neither the password nor the salted password is in the file
    store = (sec.broker.data_dir / "samsa-scram-credentials.json").read_text()
    assert "bob-secret" not in store and base64.b64encode(sp).decode() not in store
    out = subprocess.run([sys.executable, "-m", "broker.tools", "configs", "--bootstrap-server",
                          sec.addr(sec.plaintext), "--describe", "--entity-type", "users", "--entity-name", "bob"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == ("SCRAM credential configs for user-principal 'bob' are "
                                  "SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=8192")
    out = subprocess.run([sys.executable, "-m", "broker.tools", "configs", "--bootstrap-server",
                          sec.addr(sec.plaintext), "--alter", "--entity-type", "users", "--entity-name", "bob",
                          "--delete-config", "SCRAM-SHA-512"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "Completed updating config for user bob." in out.stdout
    r = Conn(sec.sasl_plaintext).scram("bob", "bob-secret", "SCRAM-SHA-512")
    assert r.error_code == SASL_AUTHENTICATION_FAILED
    # credentials survive a restart
    sec.broker.stop()
    sec.broker.start()
    assert Conn(sec.sasl_plaintext).scram("bob", "bob-secret").error_code == 0


def test_describe_scram_credentials_with_no_users_named_lists_every_user(sec):
    """librdkafka sends an empty users array (never null) when no user is named; Kafka's
    ScramControlManager treats empty like null and describes every user with credentials."""
    admin = AdminClient({"bootstrap.servers": sec.addr(sec.plaintext)})
    futs = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "frank", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 10000), b"frank-secret")])
    futs["frank"].result(timeout=30)
    described = admin.describe_user_scram_credentials().result(timeout=30)
    assert sorted(described) == ["bob", "frank"]
    frank = described["frank"]
    assert [(i.mechanism, i.iterations) for i in frank.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 10000)]
    assert sorted((i.mechanism, i.iterations) for i in described["bob"].scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192)]
    # naming users still answers exactly those, and an unknown one with RESOURCE_NOT_FOUND
    named = admin.describe_user_scram_credentials(["frank", "ghost"])
    assert named["frank"].result(timeout=30).user == "frank"
    with pytest.raises(Exception) as err:
        named["ghost"].result(timeout=30)
    assert err.value.args[0].code() == 91 and "does not exist" in err.value.args[0].str()
