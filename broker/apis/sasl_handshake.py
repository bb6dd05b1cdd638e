"""SaslHandshake (key 17), versions 0-1, and SaslAuthenticate (key 36), versions 0-2.

On SASL listeners these requests never reach the handlers below: the connection's
:class:`broker.security.authenticator.SaslAuthenticator` serves them before any handler runs
(v0 handshake: raw tokens follow; v1: SaslAuthenticate; KIP-152), including re-authentication
(KIP-368). They are registered here so that ApiVersions advertises them, as Kafka does on every
listener. Received on a PLAINTEXT or SSL listener they get ILLEGAL_SASL_STATE, as from Kafka.
"""

from __future__ import annotations

from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import NO_AUTHZ
from . import RequestContext, api


@api(ApiKey.SASL_HANDSHAKE, versions=(0, 1), authz=NO_AUTHZ)  # before authentication
async def handle_sasl_handshake(ctx: RequestContext, req: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return ctx.response(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])


@api(ApiKey.SASL_AUTHENTICATE, versions=(0, 2), authz=NO_AUTHZ)
async def handle_sasl_authenticate(ctx: RequestContext, req: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    kw: dict[str, object] = {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "auth_bytes": b"",
                          "error_message": f"SaslAuthenticate on listener {ctx.listener_name} "
                                           f"({ctx.security_protocol}), which does not use SASL"}
    if ctx.version >= 1:
        kw["session_lifetime_ms"] = 0
    return ctx.response(**kw)
