"""Pure tests of the SASL mechanisms and JAAS parsing: RFC 7677's SCRAM-SHA-256 example exchange
byte for byte, the state machine's refusals, PLAIN, and Kafka's JAAS syntax."""

from __future__ import annotations

import base64

import pytest

from broker.security import SecurityConfigError, scram
from broker.security.jaas import client_jaas_config, parse_jaas
from broker.security.plain import PlainServer
from broker.security.scram import SaslAuthenticationError, ScramCredential, ScramServer, ScramState

# RFC 7677 section 3
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE_SUFFIX = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


@pytest.fixture
def rfc_server(monkeypatch: pytest.MonkeyPatch) -> ScramServer:
    monkeypatch.setattr(scram.secrets, "token_hex", lambda n: SERVER_NONCE_SUFFIX)
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pencil", 4096, base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    return ScramServer("SCRAM-SHA-256", lambda user: cred if user == "user" else None)


def test_rfc7677_exchange(rfc_server: ScramServer) -> None:
    assert rfc_server.evaluate(CLIENT_FIRST) == SERVER_FIRST
    assert rfc_server.evaluate(CLIENT_FINAL) == SERVER_FINAL
    assert rfc_server.complete and rfc_server.username == "user"
    with pytest.raises(SaslAuthenticationError):
        rfc_server.evaluate(CLIENT_FINAL)  # nothing after COMPLETE


@pytest.mark.parametrize("final", [
    CLIENT_FINAL.replace(b"p=dHzb", b"p=dHzc"),            # wrong proof
    CLIENT_FINAL.replace(b"hNlF$k0,", b"hNlF$k1,"),          # server nonce altered
    CLIENT_FINAL.replace(b"c=biws", b"c=eSws"),              # channel binding header differs
    b"c=biws,r=x",                                           # no proof
    b"garbage",
])
def test_bad_client_final_fails(rfc_server: ScramServer, final: bytes) -> None:
    rfc_server.evaluate(CLIENT_FIRST)
    with pytest.raises(SaslAuthenticationError):
        rfc_server.evaluate(final)
    assert rfc_server.state is ScramState.FAILED


@pytest.mark.parametrize("first", [b"p=tls-unique,,n=user,r=abc", b"n,,r=abc", b"n,,n=user", b"n,,n=us=er,r=a",
                                   b"n,,n=user,r=abc,tokenauth=true", b"\xff\xfe"])
def test_bad_client_first_fails(rfc_server: ScramServer, first: bytes) -> None:
    with pytest.raises(SaslAuthenticationError):
        rfc_server.evaluate(first)


def test_unknown_user_answers_like_a_known_one_then_fails(rfc_server: ScramServer) -> None:
    out = rfc_server.evaluate(b"n,,n=nobody,r=abc")
    assert out.startswith(b"r=abc") and b",s=" in out and out.endswith(b",i=4096")
    with pytest.raises(SaslAuthenticationError, match="invalid credentials"):
        rfc_server.evaluate(b"c=biws,r=" + out.split(b",")[0][2:] + b",p=" + base64.b64encode(b"x" * 32))


def test_credentials_store_no_password() -> None:
    c = ScramCredential.from_password("SCRAM-SHA-512", "secret", 8192)
    assert c.iterations == 8192 and len(c.stored_key) == 64 and b"secret" not in repr(c.to_json()).encode()
    assert ScramCredential.from_json(c.to_json()) == c


def test_plain() -> None:
    s = PlainServer({"alice": "alice-secret"})
    assert s.evaluate(b"\0alice\0alice-secret") == b"" and s.username == "alice"
    for token in (b"\0alice\0wrong", b"\0bob\0alice-secret", b"alice\0alice-secret", b"x\0alice\0alice-secret",
                  b"\0\0alice-secret"):
        with pytest.raises(SaslAuthenticationError):
            PlainServer({"alice": "alice-secret"}).evaluate(token)


def test_jaas_syntax() -> None:
    e = parse_jaas('org.apache.kafka.common.security.scram.ScramLoginModule required username="a b" '
                   'password="p\\"w" extra=bare;')
    assert e.flag == "required" and e.options == {"username": "a b", "password": 'p"w', "extra": "bare"}
    assert parse_jaas(client_jaas_config(e)).options == {"username": "a b", "password": 'p"w'}
    for bad in ("Module", "Module required a=b", "Module often a=b;", "Module required a=;", "M required a=b; M2 required;"):
        with pytest.raises(SecurityConfigError):
            parse_jaas(bad)
