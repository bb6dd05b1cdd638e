"""The API registry: one module per Kafka API, each registering its handler here.

A handler module declares what it serves with ``@api(ApiKey.X, versions=(lo, hi))``. The
registry is the single source of truth: the ApiVersions response is built from it and the
server's version check reads it, so the two can never disagree (franz-go kfake's shape).

Handlers are ``async def handle(ctx: RequestContext, request) -> response | None``; they
build the response with ``ctx.response(...)`` (the kafka-python response class at the
request's version). Returning ``None`` sends nothing (Produce with acks=0).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protocol.api_keys import ApiKey
from protocol.messages import REQUEST_CLASSES, RequestHeader, response_class

if TYPE_CHECKING:
    from broker.server import Broker

Handler = Callable[["RequestContext", Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    min_version: int
    max_version: int
    handler: Handler

    @property
    def name(self) -> str:
        try:
            return ApiKey(self.key).name
        except ValueError:
            return str(self.key)


REGISTRY: dict[int, ApiSpec] = {}


def api(key: int, versions: tuple[int, int]) -> Callable[[Handler], Handler]:
    lo, hi = versions
    cls = REQUEST_CLASSES.get(int(key))
    if cls is None or hi > cls.max_version:
        raise ValueError(f"API {key} v{hi} is beyond what kafka.protocol can decode")

    def register(fn: Handler) -> Handler:
        if int(key) in REGISTRY:
            raise ValueError(f"API {key} registered twice")
        REGISTRY[int(key)] = ApiSpec(int(key), lo, hi, fn)
        return fn

    return register


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request it serves."""

    broker: Broker
    header: RequestHeader
    client_host: str
    client_port: int
    # The authenticated principal ("User:alice"; "User:ANONYMOUS" before/without authentication),
    # the listener the request arrived on and its security protocol (issue 10).
    principal: str = "User:ANONYMOUS"
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"

    @property
    def advertised(self) -> Any:
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
    def response_class(self) -> Any:
        return response_class(self.header.api_key, self.header.api_version)

    def response(self, **fields: Any) -> Any:
        return self.response_class(**fields)


@dataclass(slots=True)
class EncodedResponse:
    """A response a handler framed itself: ``chunks`` are bytes or file regions (``.size``,
    ``.read()``, ``.fd``, ``.position``) that the connection writes in order."""

    chunks: list[Any]
    size: int


def load_all() -> dict[int, ApiSpec]:
    """Import every handler module in this package so that each registers itself."""
    for mod in pkgutil.iter_modules(__path__):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
    return REGISTRY
