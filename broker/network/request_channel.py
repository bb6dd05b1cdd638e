"""The request channel: one frame in, one response out (Kafka's ``RequestChannel`` and ``KafkaApis.handle``).

For each frame a connection reads, :meth:`RequestChannel.handle` parses the request header,
checks the API and version against the handler registry (``broker.apis``), decodes the body,
builds the :class:`broker.apis.RequestContext`, shows the request to the test hook
(:mod:`broker.hooks`), runs the handler, applies the client quotas (KIP-219's throttle mutes the
connection) and encodes the response at the request's version. A request the broker cannot read
closes its connection; a handler that fails answers UNKNOWN_SERVER_ERROR where the response has
an error field, and the connection goes on.

It sits in the network layer, above the request layer it calls (``broker.apis``) and beside the
hooks, and below the composition root. It never imports ``broker.server``, not even for types:
what it needs of the broker is :class:`RequestHost`, the request context is made by the factory
the composition root passes in, and the handler registry and the context are read through
:class:`ApiHandler` and :class:`Context` (``broker.apis.RequestContext`` is typed against the
Broker, so importing it here would pull this module into that import circle).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Generic, Protocol, TypeAlias, TypeVar

from kafka.protocol.api_message import ApiMessage

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    MalformedRequest,
    RequestHeader,
    UnsupportedVersion,
    decode_body,
    encode_response,
    parse_header,
    response_class,
)

from .. import hooks
from ..apis.responses import DelayedResponse, EncodedResponse
from ..cluster.support import MetadataSupport
from ..hooks import HookedRequest, RequestHook
from ..metrics.stats import note_errors, response_error_counts
from ..security.quotas import WAITING_APIS

if TYPE_CHECKING:
    from ..metrics import BrokerMetrics
    from ..security.authenticator import SaslAuthenticator
    from ..security.quotas import ClientQuotaManager

log = logging.getLogger("samsa.server")
request_log = logging.getLogger("samsa.request")


class FileRegion(Protocol):
    """Records a Fetch response sends straight from a segment file (``log.segment.ReadInfo``)."""

    fd: int  # -1: opened per read
    position: int
    size: int

    def read(self) -> bytes: ...


Chunk = bytes | FileRegion
# What a connection writes: one encoded frame, a Fetch response's chunks, or nothing (no answer).
Response = bytes | list[Chunk] | None
# A handler's answer before encoding: a kafka-python response message, a response the handler
# framed itself, or None (no answer: Produce with acks=0).
HandlerResult: TypeAlias = "ApiMessage | EncodedResponse | None"


class Context(Protocol):
    """What the channel reads and sets on a request's context (``broker.apis.RequestContext``)."""

    header: RequestHeader
    principal: str
    throttle_ms: int  # KIP-219: set by a handler or by the quotas here

    @property
    def response_class(self) -> type[ApiMessage]: ...


CtxT = TypeVar("CtxT", bound=Context)
CtxT_contra = TypeVar("CtxT_contra", bound=Context, contravariant=True)


class ApiHandler(Protocol[CtxT_contra]):
    """One entry of the handler registry (``broker.apis.ApiSpec``)."""

    @property
    def key(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def min_version(self) -> int: ...

    @property
    def max_version(self) -> int: ...

    @property
    def handler(self) -> Callable[[CtxT_contra, ApiMessage], Awaitable[object]]: ...


class RequestSource(Protocol):
    """What the channel reads and sets on the connection a frame came from."""

    peer: tuple[str, int]
    principal: str
    listener_name: str
    security_protocol: str
    authenticator: SaslAuthenticator | None
    mute_ms: int

    def close(self, reason: str) -> None: ...


class RequestHost(Protocol[CtxT_contra]):
    """What the channel reads from the broker, at request time (quotas and metrics are set while
    the broker starts, after the channel is built)."""

    @property
    def registry(self) -> Mapping[int, ApiHandler[CtxT_contra]]: ...

    @property
    def request_hook(self) -> RequestHook | None: ...

    @property
    def quotas(self) -> ClientQuotaManager | None: ...

    @property
    def metrics(self) -> BrokerMetrics | None: ...

    @property
    def metadata_support(self) -> MetadataSupport:
        """A cluster's Produce is not charged request time: it waits for replication (see
        ``_apply_quotas``)."""


class FrameHandler(Protocol):
    """What a connection hands its frames to (:class:`RequestChannel`)."""

    def handle(self, frame: bytes | memoryview,
               conn: RequestSource) -> Coroutine[object, object, Response | DelayedResponse]: ...


class RequestChannel(Generic[CtxT]):
    """Turns frames into responses for every connection of the broker."""

    def __init__(self, host: RequestHost[CtxT],
                 context: Callable[[RequestHeader, str, int, str, str, str], CtxT]) -> None:
        self.host = host
        self.context = context  # (header, client host, client port, principal, listener, protocol) -> ctx

    async def handle(self, frame: bytes | memoryview, conn: RequestSource) -> Response | DelayedResponse:
        if conn.authenticator is not None:  # SASL listeners only: PLAINTEXT pays this one test
            handled, out = conn.authenticator.on_frame(frame)
            if handled:
                return out
        try:
            header = parse_header(frame)
        except MalformedRequest as e:
            conn.close(str(e))
            return None
        host = self.host
        spec = host.registry.get(header.api_key)
        if spec is None or not spec.min_version <= header.api_version <= spec.max_version:
            if header.api_key == ApiKey.API_VERSIONS:
                return self._api_versions_fallback(header)
            what = f"API key {header.api_key}" if spec is None else f"{spec.name} v{header.api_version}"
            conn.close(f"unsupported request {what} from client {header.client_id!r}")
            return None
        try:
            request = decode_body(header, frame)
        except (MalformedRequest, UnsupportedVersion) as e:
            conn.close(str(e))
            return None
        ctx = self.context(header, conn.peer[0], conn.peer[1], conn.principal, conn.listener_name,
                           conn.security_protocol)
        request_hook = host.request_hook
        if request_hook is not None:
            call = HookedRequest(ctx, request, frame, conn)
            fault = request_hook.on_request(call)
            if fault is not None:
                handled, response = await hooks.enact(fault, call, spec.handler)
                if handled:
                    return self._encode(ctx, conn, spec, response)
        quotas = host.quotas
        t0 = time.monotonic() if quotas is not None and quotas.enabled else 0.0
        try:
            response = await spec.handler(ctx, request)
            if isinstance(response, DelayedResponse):  # the connection goes on (KafkaConnection._serve)
                if t0:
                    self._apply_quotas(ctx, conn, None, t0)
                return DelayedResponse(response.op, functools.partial(self._complete_delayed, ctx, conn, spec,
                                                                      response.build))
            if t0:
                response = self._apply_quotas(ctx, conn, response, t0)
        except Exception:
            response = self._handler_failed(ctx, conn, spec)
        return self._encode(ctx, conn, spec, response)

    def _complete_delayed(self, ctx: CtxT, conn: RequestSource, spec: ApiHandler[CtxT],
                          build: Callable[[], HandlerResult]) -> Response:
        """The frame of a DelayedResponse whose operation is done (called by the connection)."""
        try:
            response = build()
        except Exception:
            response = self._handler_failed(ctx, conn, spec)
        return self._encode(ctx, conn, spec, response)

    def _handler_failed(self, ctx: CtxT, conn: RequestSource, spec: ApiHandler[CtxT]) -> ApiMessage | None:
        header = ctx.header
        log.exception("Error handling %s v%d from client %r (correlation id %d)", spec.name,
                      header.api_version, header.client_id, header.correlation_id)
        response = error_response(ctx, ErrorCode.UNKNOWN_SERVER_ERROR)
        if response is None:
            conn.close(f"internal error serving {spec.name}")
        return response

    def _encode(self, ctx: CtxT, conn: RequestSource, spec: ApiHandler[CtxT], response: HandlerResult) -> Response:
        header = ctx.header
        if response is None:
            return None
        if request_log.isEnabledFor(logging.DEBUG):
            request_log.debug("%s v%d corr=%d client=%r", spec.name, header.api_version,
                              header.correlation_id, header.client_id)
        if isinstance(response, EncodedResponse):  # the handler noted its error counts
            return response.chunks
        if self.host.metrics is not None:  # RequestMetrics ErrorsPerSec: one walk of the response's structs
            note_errors(response_error_counts(response))
        try:
            return encode_response(header.api_key, header.api_version, header.correlation_id, response)
        except Exception:
            log.exception("Cannot encode %s v%d response for client %r", spec.name, header.api_version,
                          header.client_id)
            conn.close(f"internal error encoding {spec.name}")
            return None

    def _apply_quotas(self, ctx: CtxT, conn: RequestSource, response: HandlerResult,
                      t0: float) -> HandlerResult:
        """request_percentage (the handler's time; not for requests that wait in a purgatory, see
        quotas.WAITING_APIS) and the KIP-219 throttle: the response carries throttle_time_ms and the
        connection is muted that long."""
        key = ctx.header.api_key
        quotas = self.host.quotas
        assert quotas is not None  # only called when quotas are enabled
        if key not in WAITING_APIS and not (key == ApiKey.PRODUCE and self.host.metadata_support.clustered):
            ctx.throttle_ms = max(ctx.throttle_ms, quotas.record(
                "request_percentage", ctx.principal, ctx.header.client_id, (time.monotonic() - t0) * 100))
        if ctx.throttle_ms > 0:
            conn.mute_ms = max(conn.mute_ms, ctx.throttle_ms)
            if response is not None and not isinstance(response, EncodedResponse) and \
                    hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = max(response.throttle_time_ms or 0, ctx.throttle_ms)
        return response

    def _api_versions_fallback(self, header: RequestHeader) -> bytes:
        """Kafka answers an ApiVersions version it does not know with v0 + UNSUPPORTED_VERSION."""
        resp_cls = response_class(ApiKey.API_VERSIONS, 0)
        resp = resp_cls(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[
            resp_cls.ApiVersion(api_key=s.key, min_version=s.min_version, max_version=s.max_version)
            for s in sorted(self.host.registry.values(), key=lambda s: s.key)])
        return encode_response(ApiKey.API_VERSIONS, 0, header.correlation_id, resp)


def error_response(ctx: Context, code: ErrorCode) -> ApiMessage | None:
    """A response carrying ``code`` at its top-level error field where the schema has one."""
    cls = ctx.response_class
    fields = cls.fields if hasattr(cls, "fields") else {}
    kwargs: dict[str, int] = {}
    if "error_code" in fields:
        kwargs["error_code"] = int(code)
    try:
        response: ApiMessage = cls(**kwargs)
        return response
    except Exception:
        return None
