"""What security needs of the broker's ZooKeeper client, as Protocols, and how it calls it.

The ACL store, the quota store and the SCRAM credential store keep their state in ZooKeeper in a
cluster, through ``broker/cluster/zk/client.py``'s client (Kafka's KafkaZkClient). That client
lives in the cluster layer; these Protocols name the few calls security makes, so security needs
no import from there and a reader sees exactly what it relies on.

No ZooKeeper request runs on the event loop: a store hands its blocking reads and writes to
``zk.call`` (a ZooKeeper request thread, awaited for a bounded time; REQUEST_TIMED_OUT when
ZooKeeper is slow or unreachable) and applies the result to its in-memory view back on the loop.
:class:`ZkSequencer` keeps one store's requests in order: writes one after another, and a reload
after a change notice never interleaves with a write, so a stale read cannot overwrite what a
later request must see.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("samsa.security")

T = TypeVar("T")


class ZkRequests(Protocol):
    """Running a blocking ZooKeeper request off the event loop (KafkaZkClient.call)."""

    async def call(self, fn: Callable[..., T], *args: object, timeout: float = ...) -> T: ...


class EntityConfigs(ZkRequests, Protocol):
    """``/config/<entity type>/<name>`` znodes (users, clients, ips) and their change notices."""

    def children(self, path: str) -> list[str]: ...

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]: ...

    def set_entity_config(self, entity_type: str, name: str, config: dict[str, str], *,
                          notify: bool = False) -> None: ...


class AclNodes(ZkRequests, Protocol):
    """``/kafka-acl/...`` znodes and the ``/kafka-acl-changes`` notices."""

    def get_acl_nodes(self) -> dict[str, bytes]: ...

    def set_acl_node(self, path: str, data: bytes | None) -> None: ...

    def notify_acl_change(self, what: str) -> None: ...

    def watch_children(self, path: str, callback: Callable[[list[str]], object]) -> None: ...


class SecurityZk(EntityConfigs, AclNodes, Protocol):
    """The whole of what security calls on the ZooKeeper client."""


# (entity type, name) of a changed ``/config/...`` entity; the topic registry calls each listener
EntityChangeListener = Callable[[str, str], object]


async def zk_request(zk: ZkRequests, fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` on a ZooKeeper request thread; every failure as a KafkaError: REQUEST_TIMED_OUT
    when ZooKeeper did not answer in time (from ``zk.call``), UNKNOWN_SERVER_ERROR naming what
    ZooKeeper answered otherwise (e.g. NoAuthError)."""
    try:
        return await zk.call(fn, *args)
    except KafkaError:
        raise
    except Exception as e:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                         f"ZooKeeper request failed: {type(e).__name__}: {e}".rstrip(": ")) from e


class ZkSequencer:
    """One store's ZooKeeper work, one piece at a time, in the order it was asked for.

    A piece (a CreateAcls' write, a reload after a change notice) reads or writes ZooKeeper off
    the loop and then applies the result on the loop, all while holding :attr:`lock`: writes reach
    ZooKeeper and the in-memory view in request order, and a reload that began before a write
    is applied before it. A reload asked for while another is still waiting is folded into that one.
    """

    def __init__(self, what: str) -> None:
        self.what = what  # for the log: "ACLs", "client quotas", "SCRAM credentials of alice"
        self.lock = asyncio.Lock()
        self._queued: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def reload_soon(self, reload: Callable[[], Awaitable[None]], key: str = "", what: str = "") -> None:
        """Run ``reload()`` after the pieces already queued (called on the loop by a watch)."""
        if key in self._queued:
            return
        self._queued.add(key)
        task = asyncio.get_running_loop().create_task(self._reload(reload, key, what or self.what))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reload(self, reload: Callable[[], Awaitable[None]], key: str, what: str) -> None:
        async with self.lock:
            self._queued.discard(key)  # a notice from now on needs a read after this one
            try:
                await reload()
            except KafkaError as e:
                log.warning("Could not reload %s from ZooKeeper after a change notification: %s", what,
                            e.message or e.code.name)
