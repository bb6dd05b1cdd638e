"""The API registry: one module per Kafka API, each registering its handler here.

A handler module declares what it serves with ``@api(ApiKey.X, versions=(lo, hi))``. The
registry is the single source of truth: the ApiVersions response is built from it and the
server's version check reads it, so the two can never disagree (franz-go kfake's shape).

Handlers are ``async def handle(ctx: RequestContext, request) -> response | None``; they
build the response with ``ctx.response(...)`` (the kafka-python response class at the
request's version). Returning ``None`` sends nothing (Produce with acks=0).

Imports: the services below (replica manager, coordinators, cluster, security, config), seen
through :class:`broker.services.BrokerServices`, and protocol/; never the network layer, the
composition root, the tools or the console.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kafka.protocol.api_message import ApiMessage

from protocol.api_keys import ApiKey
from protocol.messages import REQUEST_CLASSES, RequestHeader, response_class

from ..config.properties import Listener
from ..security.acl import SUPPORTED_OPERATIONS, AclOperation, Requires, ResourceType
from ..services import BrokerServices
from .responses import DelayedResponse, EncodedResponse

__all__ = ["ApiSpec", "DelayedResponse", "EncodedResponse", "Handler", "RequestContext", "api", "load_all"]

# kafka-python's (or protocol.kip*'s) request class in, its response (or a DelayedResponse, an
# EncodedResponse, or None for no response) out
Handler = Callable[["RequestContext", ApiMessage],
                   Awaitable["ApiMessage | DelayedResponse | EncodedResponse | None"]]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    min_version: int
    max_version: int
    handler: Handler
    # What the handler authorizes, declared beside it so the authorization matrix test can enumerate
    # every API: () for nothing, None if undeclared.
    authz: tuple[Requires, ...] | None = None

    @property
    def name(self) -> str:
        try:
            return ApiKey(self.key).name
        except ValueError:
            return str(self.key)


REGISTRY: dict[int, ApiSpec] = {}


def api(key: int, versions: tuple[int, int],
        authz: tuple[Requires, ...] | None = None) -> Callable[[Handler], Handler]:
    """Register a handler for ``key`` at ``versions``; ``authz`` declares the ACL checks it makes."""
    lo, hi = versions
    cls = REQUEST_CLASSES.get(int(key))
    if cls is None or hi > cls.max_version:
        raise ValueError(f"API {key} v{hi} is beyond what kafka.protocol can decode")

    def register(fn: Handler) -> Handler:
        if int(key) in REGISTRY:
            raise ValueError(f"API {key} registered twice")
        REGISTRY[int(key)] = ApiSpec(int(key), lo, hi, fn, authz)
        return fn

    return register


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request it serves."""

    broker: BrokerServices
    header: RequestHeader
    client_host: str
    client_port: int
    # The authenticated principal ("User:alice"; "User:ANONYMOUS" before/without authentication),
    # the listener the request arrived on and its security protocol.
    principal: str = "User:ANONYMOUS"
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    # Set by a handler whose client exceeded a quota (KIP-219): sent as throttle_time_ms, and
    # the connection is muted that long after the response goes out.
    throttle_ms: int = 0

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str,
                  log_denied: bool = True) -> bool:
        """May this request's principal do ``operation`` on the resource? True without an authorizer."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        return bool(authorizer.authorize(self.principal, self.client_host, operation, resource_type, name,
                                         _api_name(self.header.api_key), log_denied))

    def authorized_operations(self, resource_type: ResourceType, name: str) -> set[int]:
        """KIP-430's bit set (as bit positions): the operations the principal may do on the
        resource, among those its type supports; all of them without an authorizer."""
        ops = SUPPORTED_OPERATIONS.get(resource_type, frozenset())
        authorizer = self.broker.authorizer
        if authorizer is None:
            return {int(op) for op in ops}
        return {int(op) for op in ops if authorizer.authorize(self.principal, self.client_host, op, resource_type,
                                                              name, _api_name(self.header.api_key), False)}

    def error_response(self, code: int) -> ApiMessage:
        """This API's response with ``code`` as its top-level error and defaults elsewhere."""
        cls = self.response_class
        return cls(error_code=int(code)) if "error_code" in cls.fields else cls()

    @property
    def advertised(self) -> Listener:
        """This broker's advertised endpoint on the listener the request came in on (Kafka answers
        Metadata/FindCoordinator with the same listener's address, so TLS clients stay on TLS)."""
        for lst in self.broker.config.advertised_listeners:
            if lst.name == self.listener_name:
                return lst
        return self.broker.advertised

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def response_class(self) -> type[ApiMessage]:
        return response_class(self.header.api_key, self.header.api_version)

    def response(self, **fields: object) -> ApiMessage:
        return self.response_class(**fields)


def _api_name(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return str(key)


def load_all() -> dict[int, ApiSpec]:
    """Import every handler module in this package so that each registers itself."""
    for mod in pkgutil.iter_modules(__path__):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
    return REGISTRY
