"""The server side of SASL on one connection (Kafka's SaslServerAuthenticator).

The connection hands every frame to :meth:`SaslAuthenticator.on_frame` first. Until
authentication completes the authenticator owns the connection:

=============================  ===================================================================
state                          accepts
=============================  ===================================================================
HANDSHAKE_OR_VERSIONS_REQUEST  ApiVersions (served by the broker as usual), SaslHandshake
AUTHENTICATE                   SaslAuthenticate (handshake v1+), or raw tokens (handshake v0)
COMPLETE                       everything; SaslHandshake starts a re-authentication (KIP-368)
REAUTH_AUTHENTICATE            SaslAuthenticate (other requests keep being served meanwhile)
FAILED                         nothing: the connection is closed
=============================  ===================================================================

Any other request before COMPLETE closes the connection. A handshake naming a mechanism the
listener does not enable gets UNSUPPORTED_SASL_MECHANISM with the enabled list, then the
connection closes; a failed exchange gets SASL_AUTHENTICATION_FAILED with a message, then the
connection closes (after the response is flushed); both the answer and the close wait
``connection.failed.authentication.delay.ms`` (default 100, KIP-306), reading nothing meanwhile.
With ``connections.max.reauth.ms`` > 0 the
final SaslAuthenticate carries ``session_lifetime_ms`` and a connection whose session expired
may only re-authenticate: any other request closes it. Re-authentication must keep the
mechanism and the principal.

Everything here is synchronous: PLAIN and SCRAM verification is a few HMACs (PBKDF2 runs when
credentials are created, not when they are checked).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Protocol

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    MalformedRequest,
    RequestHeader,
    decode_body,
    encode_response,
    parse_header,
    response_class,
)

from .credentials import CredentialStore
from .errors import SecurityConfigError
from .jaas import parse_jaas
from .plain import PlainServer
from .scram import SaslAuthenticationError, ScramServer

if TYPE_CHECKING:
    from .listeners import ListenerConfig

log = logging.getLogger("samsa.security.authenticator")
_KEY = struct.Struct(">h")
_SIZE = struct.Struct(">i")
PASS = (False, None)


class SecuredConnection(Protocol):
    """What security reads and sets on a Kafka connection (server.py's KafkaConnection)."""

    transport: asyncio.Transport | None
    closed: bool
    peer: tuple[str, int]
    principal: str
    listener_name: str
    security_protocol: str
    authenticator: SaslAuthenticator | None

    def close(self, reason: str) -> None: ...


class SaslServer(Protocol):
    """The server side of one SASL mechanism (:class:`.plain.PlainServer`, :class:`.scram.ScramServer`):
    tokens in, tokens out, until ``complete``; ``username`` once the client named one."""

    @property
    def username(self) -> str | None: ...

    @property
    def complete(self) -> bool: ...

    def evaluate(self, token: bytes) -> bytes: ...


MechanismFactory = Callable[[str], SaslServer]


class SaslState(Enum):
    HANDSHAKE_OR_VERSIONS_REQUEST = "HANDSHAKE_OR_VERSIONS_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    COMPLETE = "COMPLETE"
    REAUTH_AUTHENTICATE = "REAUTH_AUTHENTICATE"
    FAILED = "FAILED"


class _NoMechanism:
    """The mechanism before SaslHandshake chose one: never asked (the state machine refuses first)."""

    username: str | None = None
    complete = False

    def evaluate(self, token: bytes) -> bytes:
        raise SaslAuthenticationError("no SASL mechanism chosen (SaslHandshake first)")


class SaslAuthenticator:
    """Per-connection SASL state; sets ``conn.principal`` when authentication completes."""

    def __init__(self, conn: SecuredConnection, listener: ListenerConfig, mechanisms: list[str],
                 mechanism_factory: MechanismFactory, reauth_ms: int) -> None:
        self.conn = conn
        self.listener = listener
        self.mechanisms = mechanisms
        self.factory = mechanism_factory
        self.reauth_ms = reauth_ms
        self.failure_delay_ms = int(listener.get("connection.failed.authentication.delay.ms", "100") or 0)
        self.state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        self.mechanism: str | None = None
        self.server: SaslServer = _NoMechanism()  # until SaslHandshake names one
        self.raw_tokens = False  # SaslHandshake v0: tokens follow without Kafka headers
        self.session_expiry: float | None = None

    # --- entry point ------------------------------------------------------------------------

    def on_frame(self, frame: bytes | memoryview) -> tuple[bool, bytes | None]:
        """(handled, response): handled=False lets the broker serve the frame as usual."""
        st = self.state
        if st is SaslState.COMPLETE or st is SaslState.REAUTH_AUTHENTICATE:
            key = _KEY.unpack_from(frame, 0)[0] if len(frame) >= 2 else -1
            if key == ApiKey.SASL_HANDSHAKE or (key == ApiKey.SASL_AUTHENTICATE and st is SaslState.REAUTH_AUTHENTICATE):
                return True, self._request(frame)
            if self.session_expiry is not None and time.monotonic() > self.session_expiry:
                self._close("session expired (connections.max.reauth.ms) without re-authentication")
                return True, None
            return PASS
        if self.raw_tokens:
            return True, self._raw_token(bytes(frame))
        key = _KEY.unpack_from(frame, 0)[0] if len(frame) >= 2 else -1
        if key == ApiKey.API_VERSIONS:
            return PASS
        if key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
            return True, self._request(frame)
        self._refuse(key)
        return True, None

    # --- helpers ---------------------------------------------------------------------------

    def _close(self, reason: str) -> None:
        self.state = SaslState.FAILED
        self.conn.close(reason)

    def _send_and_close(self, out: bytes | None, reason: str, delay: bool = False) -> None:
        """Answer then close; ``delay``: after ``connection.failed.authentication.delay.ms`` (KIP-306:
        a failed login costs the client that long, which slows password guessing)."""
        self.state = SaslState.FAILED
        if delay and self.failure_delay_ms > 0:
            if self.conn.transport is not None and not self.conn.closed:
                self.conn.transport.pause_reading()  # nothing more is read from a failed client
            asyncio.get_running_loop().call_later(self.failure_delay_ms / 1000, self._send_and_close, out, reason)
            return
        transport = self.conn.transport
        if transport is not None and not self.conn.closed and out is not None:
            transport.write(out)  # close() flushes what is buffered first
        self.conn.close(reason)

    def _refuse(self, key: int) -> None:
        try:
            name = ApiKey(key).name
        except ValueError:
            name = str(key)
        self._close(f"unexpected Kafka request of type {name} during SASL handshake on listener {self.listener.name}")

    def _request(self, frame: bytes | memoryview) -> bytes | None:
        try:
            header = parse_header(frame)
        except MalformedRequest as e:
            self._close(str(e))
            return None
        hi = 1 if header.api_key == ApiKey.SASL_HANDSHAKE else 2
        if header.api_version > hi:
            self._close(f"unsupported {ApiKey(header.api_key).name} v{header.api_version}")
            return None
        try:
            request = decode_body(header, frame)
        except Exception as e:
            self._close(str(e))
            return None
        if header.api_key == ApiKey.SASL_HANDSHAKE:
            return self._handshake(header, request)
        return self._authenticate(header, request)

    # --- SaslHandshake -----------------------------------------------------------------------

    def _handshake(self, header: RequestHeader, request: SaslHandshakeRequest) -> bytes | None:
        resp_cls = response_class(ApiKey.SASL_HANDSHAKE, header.api_version)
        mech = str(request.mechanism or "")

        def answer(code: ErrorCode) -> bytes:
            return encode_response(ApiKey.SASL_HANDSHAKE, header.api_version, header.correlation_id,
                                   resp_cls(error_code=int(code), mechanisms=list(self.mechanisms)))

        if self.state is SaslState.COMPLETE:  # KIP-368 re-authentication
            if header.api_version < 1:
                self._send_and_close(answer(ErrorCode.ILLEGAL_SASL_STATE), "SaslHandshake v0 after authentication")
                return None
            if mech != self.mechanism:
                self._send_and_close(answer(ErrorCode.ILLEGAL_SASL_STATE),
                                     f"re-authentication changed the SASL mechanism from {self.mechanism} to {mech}")
                return None
            self.server = self.factory(mech)
            self.state = SaslState.REAUTH_AUTHENTICATE
            return answer(ErrorCode.NONE)
        if self.state is not SaslState.HANDSHAKE_OR_VERSIONS_REQUEST:
            self._send_and_close(answer(ErrorCode.ILLEGAL_SASL_STATE), "unexpected SaslHandshake")
            return None
        if mech not in self.mechanisms:
            self._send_and_close(answer(ErrorCode.UNSUPPORTED_SASL_MECHANISM),
                                 f"unsupported SASL mechanism {mech!r} (enabled: {', '.join(self.mechanisms)})")
            return None
        self.mechanism = mech
        self.server = self.factory(mech)
        self.raw_tokens = header.api_version == 0
        self.state = SaslState.AUTHENTICATE
        return answer(ErrorCode.NONE)

    # --- SaslAuthenticate ----------------------------------------------------------------------

    def _authenticate(self, header: RequestHeader, request: SaslAuthenticateRequest) -> bytes | None:
        resp_cls = response_class(ApiKey.SASL_AUTHENTICATE, header.api_version)

        def answer(code: ErrorCode, message: str | None, token: bytes, lifetime: int = 0) -> bytes:
            kw: dict[str, object] = {"error_code": int(code), "error_message": message, "auth_bytes": token}
            if header.api_version >= 1:
                kw["session_lifetime_ms"] = lifetime
            return encode_response(ApiKey.SASL_AUTHENTICATE, header.api_version, header.correlation_id,
                                   resp_cls(**kw))

        if self.state not in (SaslState.AUTHENTICATE, SaslState.REAUTH_AUTHENTICATE) or self.raw_tokens:
            self._send_and_close(answer(ErrorCode.ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate request", b""),
                                 "SaslAuthenticate before SaslHandshake")
            return None
        try:
            token = self.server.evaluate(bytes(request.auth_bytes or b""))
        except SaslAuthenticationError as e:
            self._failed(str(e))
            self._send_and_close(answer(ErrorCode.SASL_AUTHENTICATION_FAILED, str(e), b""),
                                 f"SASL {self.mechanism} authentication failed", delay=True)
            return None
        if not self.server.complete:
            return answer(ErrorCode.NONE, None, token)
        error = self._complete()
        if error:
            self._send_and_close(answer(ErrorCode.SASL_AUTHENTICATION_FAILED, error, b""), error, delay=True)
            return None
        return answer(ErrorCode.NONE, None, token, self.reauth_ms if self.reauth_ms > 0 else 0)

    def _raw_token(self, token: bytes) -> bytes | None:
        """SaslHandshake v0: the client's tokens and ours are bare size-prefixed bytes."""
        try:
            out = self.server.evaluate(token)
        except SaslAuthenticationError as e:
            self._failed(str(e))
            self._send_and_close(None, f"SASL {self.mechanism} authentication failed", delay=True)
            return None
        if self.server.complete:
            self.raw_tokens = False
            error = self._complete()
            if error:
                self._close(error)
                return None
        return _SIZE.pack(len(out)) + out

    def _failed(self, message: str) -> None:
        user = self.server.username
        log.info("Failed authentication with %s:%d (listener %s, mechanism %s, user %r): %s", self.conn.peer[0],
                 self.conn.peer[1], self.listener.name, self.mechanism, user, message)

    def _complete(self) -> str | None:
        principal = f"User:{self.server.username}"
        if self.state is SaslState.REAUTH_AUTHENTICATE and principal != self.conn.principal:
            return "Cannot change principals during re-authentication from " \
                   f"{self.conn.principal} to {principal}"
        self.conn.principal = principal
        self.state = SaslState.COMPLETE
        self.session_expiry = time.monotonic() + self.reauth_ms / 1000 if self.reauth_ms > 0 else None
        log.debug("Authenticated %s with %s on listener %s", principal, self.mechanism, self.listener.name)
        return None


def mechanism_factory(listener: ListenerConfig, credentials: CredentialStore) -> MechanismFactory:
    """Builds the server side of each enabled mechanism for ``listener``."""
    plain_users: dict[str, str] = {}
    mechs = listener.enabled_mechanisms()
    if "PLAIN" in mechs:
        jaas = listener.jaas_config("PLAIN")
        if not jaas:
            raise SecurityConfigError(f"Listener {listener.name} enables PLAIN but has no "
                                      f"{listener.prefix}plain.sasl.jaas.config (PlainLoginModule with "
                                      "user_<name>=\"<password>\" options)")
        plain_users = parse_jaas(jaas).users()

    def make(mech: str) -> SaslServer:
        if mech == "PLAIN":
            return PlainServer(plain_users)
        return ScramServer(mech, lambda user: credentials.get(user, mech))

    return make
