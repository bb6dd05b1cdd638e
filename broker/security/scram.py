"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677): credentials and the server exchange.

A :class:`ScramCredential` is what the broker keeps: salt, iterations, StoredKey = H(ClientKey)
and ServerKey, never the password nor the salted password. :class:`ScramServer` is the sans-io
server side of one exchange::

    client-first  n,,n=alice,r=<cnonce>            -> server-first  r=<cnonce+snonce>,s=<salt>,i=<n>
    client-final  c=biws,r=<nonce>,p=<proof>        -> server-final  v=<ServerSignature>

A proof is checked by recovering ClientKey = proof XOR HMAC(StoredKey, AuthMessage) and
comparing H(ClientKey) with StoredKey in constant time. An unknown user gets a server-first
message built from a fake credential so that a client cannot tell unknown users from wrong
passwords; either fails at the proof with the same message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384  # Kafka's ScramMechanism maxIterations
DEFAULT_ITERATIONS = 4096

# AlterUserScramCredentials / DescribeUserScramCredentials mechanism ids (KIP-554).
MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {v: k for k, v in MECHANISM_IDS.items()}
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class SaslAuthenticationError(Exception):
    """Authentication failed; the message is safe to send to the client and to log."""


def _hash_name(mechanism: str) -> str:
    return _HASHES[mechanism]


def _hmac(mechanism: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, _hash_name(mechanism)).digest()


def _h(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(_hash_name(mechanism), data).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode("utf-8"), salt, iterations)


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
        client_key = _hmac(mechanism, salted, b"Client Key")
        return cls(salt, _h(mechanism, client_key), _hmac(mechanism, salted, b"Server Key"), iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                      salt: bytes | None = None) -> ScramCredential:
        salt = salt if salt is not None else os.urandom(32)
        return cls.from_salted_password(mechanism, salted_password(mechanism, password, salt, iterations),
                                        salt, iterations)

    def to_json(self) -> dict[str, object]:
        b64 = base64.b64encode
        return {"salt": b64(self.salt).decode(), "stored_key": b64(self.stored_key).decode(),
                "server_key": b64(self.server_key).decode(), "iterations": self.iterations}

    @classmethod
    def from_json(cls, d: dict[str, object]) -> ScramCredential:
        dec = base64.b64decode
        return cls(dec(str(d["salt"])), dec(str(d["stored_key"])), dec(str(d["server_key"])),
                   int(str(d["iterations"])))


class ScramState(Enum):
    RECEIVE_CLIENT_FIRST_MESSAGE = "RECEIVE_CLIENT_FIRST_MESSAGE"
    RECEIVE_CLIENT_FINAL_MESSAGE = "RECEIVE_CLIENT_FINAL_MESSAGE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


def _attrs(msg: str) -> list[tuple[str, str]]:
    out = []
    for part in msg.split(","):
        if len(part) < 2 or part[1] != "=":
            raise SaslAuthenticationError("Invalid SCRAM message")
        out.append((part[0], part[2:]))
    return out


def _unescape_username(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise SaslAuthenticationError("Invalid username in SCRAM client first message")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One SCRAM exchange on the server; ``evaluate(token) -> token`` until ``complete``."""

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None]) -> None:
        self.mechanism = mechanism
        self.lookup = lookup
        self.state = ScramState.RECEIVE_CLIENT_FIRST_MESSAGE
        self.username: str | None = None
        self._credential: ScramCredential | None = None
        self._known = False
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2 = ""

    @property
    def complete(self) -> bool:
        return self.state is ScramState.COMPLETE

    def _fail(self, message: str) -> SaslAuthenticationError:
        self.state = ScramState.FAILED
        return SaslAuthenticationError(message)

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("Invalid SCRAM message: not UTF-8") from None
        if self.state is ScramState.RECEIVE_CLIENT_FIRST_MESSAGE:
            return self._client_first(text)
        if self.state is ScramState.RECEIVE_CLIENT_FINAL_MESSAGE:
            return self._client_final(text)
        raise self._fail(f"Unexpected SCRAM message in state {self.state.value}")

    def _client_first(self, text: str) -> bytes:
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y") or (parts[1] and not parts[1].startswith("a=")):
            raise self._fail("Invalid SCRAM client first message")
        self._gs2 = f"{parts[0]},{parts[1]},"
        bare = parts[2]
        try:
            attrs = _attrs(bare)
        except SaslAuthenticationError:
            raise self._fail("Invalid SCRAM client first message") from None
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise self._fail("Invalid SCRAM client first message")
        extensions = dict(attrs[2:])
        if extensions.get("tokenauth", "false").lower() == "true":
            raise self._fail("Authentication failed: delegation tokens are not supported")
        self.username = _unescape_username(attrs[0][1])
        cred = self.lookup(self.username)
        self._known = cred is not None
        if cred is None:  # same shape of answer for unknown users; the proof cannot match
            cred = ScramCredential(os.urandom(32), os.urandom(64), os.urandom(64), DEFAULT_ITERATIONS)
        self._credential = cred
        self._client_first_bare = bare
        self._nonce = attrs[1][1] + secrets.token_hex(16)  # [0-9a-f]: Kafka's nonces are alphanumeric too
        self._server_first = f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
        self.state = ScramState.RECEIVE_CLIENT_FINAL_MESSAGE
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        fail_msg = f"Authentication failed during authentication due to invalid credentials with SASL mechanism " \
                   f"{self.mechanism}"
        try:
            attrs = _attrs(text)
        except SaslAuthenticationError:
            raise self._fail("Invalid SCRAM client final message") from None
        if len(attrs) < 3 or attrs[0][0] != "c" or attrs[1][0] != "r" or attrs[-1][0] != "p":
            raise self._fail("Invalid SCRAM client final message")
        # Kafka's ScramSaslServer checks that the nonce *ends with* the server-first nonce: some
        # librdkafka versions (2.0.x) echo the client nonce twice, and Kafka accepts them.
        if not attrs[1][1].endswith(self._nonce):
            raise self._fail("Invalid SCRAM client final message: nonces do not match")
        try:
            channel = base64.b64decode(attrs[0][1], validate=True).decode("utf-8")
            proof = base64.b64decode(attrs[-1][1], validate=True)
        except Exception:
            raise self._fail("Invalid SCRAM client final message: bad base64") from None
        if channel != self._gs2:
            raise self._fail("Invalid SCRAM client final message: channel binding does not match")
        without_proof = text[:text.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        cred = self._credential
        assert cred is not None
        signature = _hmac(self.mechanism, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise self._fail(fail_msg)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not self._known or not hmac.compare_digest(_h(self.mechanism, client_key), cred.stored_key):
            raise self._fail(fail_msg)
        self.state = ScramState.COMPLETE
        server_signature = _hmac(self.mechanism, cred.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)
