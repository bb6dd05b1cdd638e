"""A minimal asyncio Kafka client for broker-to-broker requests (Kafka's ``NetworkClient``).

The controller uses it to send LeaderAndIsr / UpdateMetadata / StopReplica to brokers, replica
fetchers to send Fetch and OffsetForLeaderEpoch to leaders, and brokers to send
ControlledShutdown to the controller. Requests are kafka-python message objects; one request is
in flight per connection at a time (Kafka's inter-broker channels are sequential too), so the
response simply follows the request. A failed connection raises :class:`ConnectionError` and is
re-established on the next send.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
from typing import Any

from protocol.messages import RESPONSE_CLASSES

log = logging.getLogger("samsa.interbroker")

_SIZE = struct.Struct(">i")


class BrokerClient:
    """One connection to one broker, reconnecting on demand.

    ``security`` (TLS context and SASL credentials of the inter-broker listener) is set once by
    the broker at start (one broker per process) when that listener is not PLAINTEXT.
    """

    security: Any = None  # broker.security.client.InterBrokerSecurity

    def __init__(self, host: str, port: int, client_id: str, *, connect_timeout: float = 5.0) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()
        self._corr = itertools.count(1)

    def __repr__(self) -> str:
        return f"<BrokerClient {self.host}:{self.port}>"

    async def _ensure(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._writer is None or self._writer.is_closing():
            sec = BrokerClient.security
            if sec is None:
                self._reader, self._writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port), self.connect_timeout)
            else:
                self._reader, self._writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port, ssl=sec.ssl_context,
                                            server_hostname=self.host if sec.ssl_context else None),
                    self.connect_timeout)
                await asyncio.wait_for(sec.authenticate(self._reader, self._writer, self.client_id),
                                       self.connect_timeout)
        assert self._reader is not None and self._writer is not None
        return self._reader, self._writer

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def send(self, request: Any, version: int, *, timeout: float = 30.0) -> Any:
        """Send ``request`` at ``version`` and return the decoded response."""
        async with self._lock:
            try:
                return await asyncio.wait_for(self._send(request, version), timeout)
            except (OSError, asyncio.IncompleteReadError, TimeoutError, EOFError) as e:
                self.close()
                raise ConnectionError(f"{self.host}:{self.port}: {e or type(e).__name__}") from e

    def next_correlation_id(self) -> int:
        return next(self._corr) & 0x7FFFFFFF

    async def send_frame(self, frame: bytes, *, timeout: float = 30.0) -> bytes:
        """Send an already framed request (a hot path's hand-written encoder, see
        ``protocol.fetch_codec``) and return the response frame undecoded, header included; the
        caller checks the correlation id it put in."""
        async with self._lock:
            try:
                return await asyncio.wait_for(self._send_frame(frame), timeout)
            except (OSError, asyncio.IncompleteReadError, TimeoutError, EOFError) as e:
                self.close()
                raise ConnectionError(f"{self.host}:{self.port}: {e or type(e).__name__}") from e

    async def _send_frame(self, frame: bytes) -> bytes:
        reader, writer = await self._ensure()
        writer.write(frame)
        await writer.drain()
        (size,) = _SIZE.unpack(await reader.readexactly(4))
        return await reader.readexactly(size)

    async def _send(self, request: Any, version: int) -> Any:
        reader, writer = await self._ensure()
        corr = next(self._corr) & 0x7FFFFFFF
        request.API_VERSION = version
        request.with_header(correlation_id=corr, client_id=self.client_id)
        writer.write(bytes(request.encode(header=True, framed=True)))
        await writer.drain()
        (size,) = _SIZE.unpack(await reader.readexactly(4))
        payload = await reader.readexactly(size)
        resp_cls = RESPONSE_CLASSES[request.API_KEY]
        response = resp_cls.decode(payload, version=version, header=True)
        got = response._header.correlation_id if response._header is not None else corr
        if got != corr:
            raise ConnectionError(f"correlation id {got} does not match request {corr}")
        return response
