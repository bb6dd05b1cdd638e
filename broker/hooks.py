"""Request hooks: how a test (or a fault switch) reaches into the broker's request dispatch.

franz-go kfake's ``ControlKey`` in Python. A hook object is handed to the broker when it is
built (``Broker(config, request_hook=hook)``); the dispatch then shows it every decoded request
(after authentication, before the handler) and does what the returned :class:`Fault` says:

* ``error``: answer with this Kafka error code wherever the API's response carries one (the
  request-level ``error_code`` and every topic's or partition's, mirroring the request's topics
  and partitions, see :func:`error_response`); the handler does not run.
* ``delay_ms``: wait this long first, then go on (with the other fields, or normally). The
  connection serves nothing else meanwhile, as a slow broker would.
* ``drop_response``: send nothing back. With ``process=True`` the handler runs first, so the
  request takes effect and only its answer is lost (a client times out and retries).
* ``close_connection``: close the connection instead of answering (``process`` as above).

``None`` means "serve normally". Without a hook (the default) the dispatch pays one ``is not
None`` test per request. The hook is called on the broker's event loop and must not block;
it must not keep ``call.request`` beyond the call (a Produce's records are views of the read
buffer): copy ``call.frame`` instead, as :class:`broker.testing.faults.FaultPlan` does.

This module never reads the environment: a test hands its faults to the broker it builds, so two
brokers in one process can carry different faults and nothing leaks from one test to the next.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.data_container import DataContainer

from protocol.api_keys import ApiKey
from protocol.kafka_python_internals import SchemaField, is_map_key

from .apis.responses import DelayedResponse
from .services import BrokerServices

log = logging.getLogger("samsa.hooks")


@dataclass(frozen=True, slots=True)
class Fault:
    """What the dispatch does with one request instead of (or before) serving it normally."""

    error: int | None = None
    delay_ms: float = 0
    drop_response: bool = False
    close_connection: bool = False
    process: bool = True  # drop_response / close_connection: run the handler first

    def __post_init__(self) -> None:
        if self.error is not None and (self.drop_response or self.close_connection):
            raise ValueError("a Fault answers with an error, drops the response or closes the connection: one of them")
        if self.drop_response and self.close_connection:
            raise ValueError("a Fault drops the response or closes the connection, not both")
        if self.delay_ms < 0:
            raise ValueError("delay_ms must be >= 0")


class Connection(Protocol):
    """What a hook may do to the client's connection."""

    def close(self, reason: str) -> None: ...


@dataclass(frozen=True, slots=True)
class HookedRequest:
    """One request as the hook sees it."""

    # broker.apis.RequestContext; the network layer's request channel is generic over its
    # context type (broker/network/request_channel.py), so it is not named here
    ctx: Any
    request: ApiMessage  # the decoded kafka.protocol request object: valid during the call only
    frame: bytes | memoryview  # the request's frame (header and body), valid during the call only
    connection: Connection  # the client's connection (broker.network.connection.KafkaConnection)

    @property
    def api_key(self) -> int:
        return int(self.ctx.header.api_key)

    @property
    def api_version(self) -> int:
        return int(self.ctx.header.api_version)

    @property
    def api_name(self) -> str:
        return api_name(self.api_key)

    def topics(self) -> set[str]:
        """The topic names the request names (topic ids resolved through the broker's metadata)."""
        return request_topics(self.request, self.ctx.broker)


class RequestHook(Protocol):
    def on_request(self, call: HookedRequest) -> Fault | None: ...


def api_name(key: int) -> str:
    """Kafka's name for an API key in CamelCase, as the protocol guide writes it ("OffsetCommit")."""
    try:
        return "".join(p.capitalize() for p in ApiKey(key).name.split("_"))
    except ValueError:
        return str(key)


async def enact(fault: Fault, call: HookedRequest,
                handler: Callable[[Any, ApiMessage], Awaitable[object]]) -> tuple[bool, ApiMessage | None]:
    """Carry out ``fault``. Returns (handled, response): handled=False means "serve normally"."""
    if fault.delay_ms:
        await asyncio.sleep(fault.delay_ms / 1000)
    if fault.error is not None:
        if not _expects_response(call.request):  # acks=0: the client reads no answer
            return True, None
        return True, error_response(call.ctx.response_class, call.request, fault.error)
    if not (fault.drop_response or fault.close_connection):
        return False, None
    if fault.process:
        try:
            response = await handler(call.ctx, call.request)
            if isinstance(response, DelayedResponse):  # acks=all: let it complete
                await response.result()
        except Exception:
            log.exception("Error handling %s (its response is dropped by a request hook)", call.api_name)
    if fault.close_connection:
        call.connection.close(f"a request hook closes the connection on {call.api_name} "
                              f"(correlation id {call.ctx.header.correlation_id})")
    return True, None


def _expects_response(request: ApiMessage) -> bool:
    # kafka-python's expect_response() where the class has it; else Produce's acks decides
    expect = getattr(request, "expect_response", None)
    if callable(expect):
        try:
            return bool(expect())
        except Exception:
            return True
    return getattr(request, "acks", 1) != 0


# --- error responses shaped like the request ---------------------------------------------------
# Kafka's AbstractRequest.getErrorResponse, once for every API, driven by the schemas: the
# response gets ``code`` in every int16 field whose name ends in ``error_code``, and each of its
# struct arrays is filled from the request's array of the same entities (topics, partitions,
# groups, resources), matched by their key fields (``name``/``topic``, ``partition_index``/
# ``partition``/``index``, ``group_id`` ...). A plain array in the request (``partition_indexes``,
# ``topic_names``, ``coordinator_keys``) fills a response array keyed by that kind of value.

_ALIASES = {"topic": "name", "topic_name": "name", "partition": "partition_index", "index": "partition_index",
            "partition_id": "partition_index"}
_KEYS = {"name", "topic_id", "partition_index", "group_id", "key", "resource_name", "resource_type",
         "transactional_id", "member_id", "producer_id"}


def _canon(name: str) -> str:
    return _ALIASES.get(name, name)


def _is_key(name: str, field: SchemaField) -> bool:
    return is_map_key(field) or _canon(name) in _KEYS


def _struct_arrays(cls: type[DataContainer], version: int) -> dict[str, SchemaField]:
    return {n: f for n, f in cls.fields.items() if f.is_struct_array() and f.for_version_q(version)}


def _key_fields(cls: type[DataContainer], version: int) -> dict[str, str]:
    """canonical key name -> field name, over the element class's simple fields at ``version``."""
    return {_canon(n): n for n, f in cls.fields.items()
            if not f.is_array() and not f.is_struct() and f.for_version_q(version) and _is_key(n, f)}


def _plain_key(n: str, field: SchemaField) -> str | None:
    """The canonical key a plain array's items stand for (``partition_indexes`` -> partition_index)."""
    if "partition" in n and "int" in field.type_str:
        return "partition_index"
    if field.type_str.endswith("string"):
        if "topic" in n:
            return "name"
        if "group" in n:
            return "group_id"
        if "key" in n:
            return "key"
        if "transactional" in n:
            return "transactional_id"
    return None


def error_response(response_cls: type[ApiMessage], request: ApiMessage, code: int) -> ApiMessage:
    """``response_cls`` (at the request's version) answering every entity of ``request`` with ``code``."""
    version = request.API_VERSION if hasattr(request, "API_VERSION") else response_cls.API_VERSION
    version = getattr(request, "version", None) or version  # set on a decoded request only
    return _fill(response_cls, request, int(code), version)


def _fill(cls: type[DataContainer], req: DataContainer | None, code: int, version: int) -> DataContainer:
    kwargs: dict[str, object] = {}
    for n, f in cls.fields.items():
        if not f.for_version_q(version):
            continue
        if n.endswith("error_code") and not f.is_array() and "int16" in f.type_str:
            kwargs[n] = code
        elif n.endswith("offset") and f.type_str == "int64":  # Kafka answers an error with offset -1
            kwargs[n] = -1
    if req is None:
        return cls(**kwargs)
    req_fields = {n: f for n, f in type(req).fields.items() if f.for_version_q(version)}
    for n, f in _struct_arrays(cls, version).items():
        elem = f.data_class
        keys = _key_fields(elem, version)
        if not keys:
            continue
        source = _matching(n, keys, req_fields, version)
        if source is None:
            continue
        source_name, source = source
        items = getattr(req, source_name, None) or []  # the request's field of that name (by schema)
        out = []
        for item in items:
            if source.is_struct_array():
                item_keys = _key_fields(type(item), version)
                child = _fill(elem, item, code, version)
                for canon, rname in item_keys.items():
                    if canon in keys:
                        setattr(child, keys[canon], getattr(item, rname))
            else:
                child = _fill(elem, None, code, version)
                setattr(child, keys[_plain_key(source_name, source)], item)  # type: ignore[index]
            out.append(child)
        kwargs[n] = out
    return cls(**kwargs)


def _matching(name: str, keys: dict[str, str], req_fields: dict[str, SchemaField],
              version: int) -> tuple[str, SchemaField] | None:
    best = None
    for rn, rf in req_fields.items():
        if rf.is_struct_array():
            rkeys = _key_fields(rf.data_class, version)
            if not set(rkeys) & set(keys):
                continue
        elif rf.is_array():
            pk = _plain_key(rn, rf)
            if pk is None or pk not in keys:
                continue
        else:
            continue
        if rn == name:
            return rn, rf
        best = best or (rn, rf)
    return best


def request_topics(request: ApiMessage, broker: BrokerServices | None = None) -> set[str]:
    """Topic names a request names, one level down its top-level arrays (ids resolved by ``broker``)."""
    found: set[str] = set()
    fields = type(request).fields
    for n, f in fields.items():
        value = getattr(request, n, None)  # each schema field, by name
        if not value or not f.is_array():
            continue
        if not f.is_struct_array():
            if "topic" in n and isinstance(value[0], str):
                found.update(value)
            continue
        for item in value:
            # the topic's name, whichever the schema calls it, or its id (KIP-516)
            name = getattr(item, "name", None) or getattr(item, "topic", None)
            if isinstance(name, str) and name:
                found.add(name)
                continue
            tid = getattr(item, "topic_id", None)
            if tid is not None and broker is not None:
                info = broker.topics.by_id(tid)
                if info is not None:
                    found.add(info.name)
    return found
