"""What a handler may return besides a response message: a response that waits, a response framed already.

These sit apart from the registry (``broker.apis``) so that the network layer, which acts on
them, reads them without the request context (typed against the composition root's Broker).
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_message import ApiMessage


class DelayedResponse:
    """A handler's answer whose work is done but whose response must wait: Kafka's delayed
    operations (an acks=all Produce parked until the ISR has its records).

    Everything that orders requests (validation, the append) has happened when the handler
    returns this; ``wait`` is a coroutine that only waits and then builds the response. The
    connection serves the client's next requests meanwhile and writes the responses in request
    order (see ``broker/network/connection.py``), so a producer that pipelines requests is not held to one
    replication round trip per request.
    """

    __slots__ = ("wait",)

    def __init__(self, wait: Coroutine[object, object, ApiMessage | None]) -> None:
        self.wait = wait


@dataclass(slots=True)
class EncodedResponse:
    """A response a handler framed itself: ``chunks`` are bytes or file regions (``.size``,
    ``.read()``, ``.fd``, ``.position``) that the connection writes in order."""

    chunks: list[Any]  # bytes | broker.network.request_channel.FileRegion
    size: int
