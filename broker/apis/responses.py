"""What a handler may return besides a response message: a response that waits, a response framed already.

These sit apart from the registry (``broker.apis``) so that the network layer, which acts on
them, reads them without the request context (typed against the composition root's Broker).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")


class Pending(Protocol):
    """A delayed operation (``broker/replica/purgatory.py``) a response waits on. It completes
    once; ``on_done`` callbacks run synchronously, in the loop turn of the event that completes
    it (at once when it is done already), as Kafka completes a delayed operation in the thread of
    the request that satisfies it."""

    @property
    def done(self) -> bool: ...

    def on_done(self, callback: Callable[[], None]) -> None: ...

    async def wait(self) -> None: ...


class DelayedResponse(Generic[T]):
    """A handler's answer whose work is done but whose response must wait: Kafka's delayed
    operations (an acks=all Produce parked until the ISR has its records; a follower's Fetch
    parked until there is something to send it).

    Everything that orders requests (validation, the append, a follower's progress) has happened
    when the handler returns this; ``build`` only reads and encodes, once ``op`` is done. The
    connection serves the client's next requests meanwhile and writes the responses in request
    order (see ``broker/network/connection.py``), so a producer that pipelines requests is not
    held to one replication round trip per request. The connection writes the response from
    ``op``'s completion callback, in the same loop turn: no task wakes up in between.
    """

    __slots__ = ("op", "build")

    def __init__(self, op: Pending, build: Callable[[], T]) -> None:
        self.op = op
        # a handler's: the response (ApiMessage | EncodedResponse | None); the request channel's: its frame
        self.build = build

    async def result(self) -> T:
        """Wait for ``op`` and build the response (for a caller outside the connection's pipeline)."""
        await self.op.wait()
        return self.build()


@dataclass(slots=True)
class EncodedResponse:
    """A response a handler framed itself: ``chunks`` are bytes or file regions (``.size``,
    ``.read()``, ``.fd``, ``.position``) that the connection writes in order."""

    chunks: list[Any]  # bytes | broker.network.request_channel.FileRegion
    size: int
