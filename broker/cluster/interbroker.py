"""A minimal asyncio Kafka client for broker-to-broker requests (Kafka's ``NetworkClient``).

The controller uses it to send LeaderAndIsr / UpdateMetadata / StopReplica to brokers, replica
fetchers to send Fetch and OffsetForLeaderEpoch to leaders, and brokers to send
ControlledShutdown to the controller. Requests are kafka-python message objects; one request is
in flight per connection at a time (Kafka's inter-broker channels are sequential too), so the
response simply follows the request. A failed connection raises :class:`ConnectionError` and is
re-established on the next send.

The connection is a :class:`Channel`, an ``asyncio.BufferedProtocol`` over the same
:class:`protocol.framing.FrameDecoder` the broker's own connections use: a response (a follower's
Fetch response of up to ``replica.fetch.response.max.bytes``) is read, or decrypted, straight
into a buffer of its own and handed out as a view of it, with no stream buffer to copy through
and no flow-control pauses every 128 KiB as ``asyncio.StreamReader`` makes.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol

from kafka.protocol.api_message import ApiMessage

from protocol.framing import FrameDecoder, FrameError
from protocol.messages import RESPONSE_CLASSES

log = logging.getLogger("samsa.interbroker")

MAX_RESPONSE_BYTES = 1 << 30  # a response frame larger than this is a broken peer: the connection closes


class FrameListener(Protocol):
    """Takes a channel's response frames as they are read, in the protocol callback itself,
    instead of a task awaiting ``roundtrip`` (the replica fetcher's steady state)."""

    def on_frame(self, frame: bytes | memoryview) -> None: ...

    def on_failure(self, exc: BaseException) -> None: ...


class Channel(asyncio.BufferedProtocol):
    """One inter-broker connection: writes requests, hands out response frames in order."""

    def __init__(self) -> None:
        self.decoder = FrameDecoder(MAX_RESPONSE_BYTES)
        self.frames: deque[bytes | memoryview] = deque()
        self.transport: asyncio.Transport | None = None
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.timed_out = False  # roundtrip's timer fired
        self.listener: FrameListener | None = None  # set: frames go to it as they arrive
        self.write_ok = asyncio.Event()
        self.write_ok.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not subclasses

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.decoder.buffer_updated(nbytes)
        except FrameError as e:
            self._fail(ConnectionError(f"malformed response: {e}"))
            if self.transport is not None:
                self.transport.close()
            return
        if frames:
            if self.listener is not None and not self.frames:
                for f in frames:
                    if self.listener is None:  # it let go: the rest waits for roundtrip
                        self.frames.append(f)
                    else:
                        self.listener.on_frame(f)
                if self.frames:
                    self._wake()
                return
            self.frames.extend(frames)
            self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or EOFError("connection closed by the broker"))
        self.write_ok.set()

    def pause_writing(self) -> None:
        self.write_ok.clear()

    def resume_writing(self) -> None:
        self.write_ok.set()

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc
        self._wake()
        listener, self.listener = self.listener, None
        if listener is not None:
            listener.on_failure(self.error)

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    @property
    def closed(self) -> bool:
        return self.error is not None or self.transport is None or self.transport.is_closing()

    async def roundtrip(self, frame: bytes | bytearray, timeout: float | None = None) -> bytes | memoryview:
        """Write a framed request and return the next response frame (size prefix removed).
        With ``timeout`` (seconds), a response that has not come by then raises TimeoutError: one
        timer on the waiter (``loop.call_at``), cheaper than an ``asyncio.timeout`` context per call."""
        if self.error is not None:
            raise self.error
        assert self.transport is not None
        self.transport.write(frame)
        if not self.write_ok.is_set():
            await self.write_ok.wait()
        if self.frames:
            return self.frames.popleft()
        loop = asyncio.get_running_loop()
        timer = None if timeout is None else loop.call_at(loop.time() + timeout, self._time_out)
        try:
            while not self.frames:
                if self.error is not None:
                    raise self.error
                self.waiter = loop.create_future()
                await self.waiter
                if self.timed_out:
                    raise TimeoutError(f"no response within {timeout:.1f} s")
        finally:
            if timer is not None:
                timer.cancel()
            self.timed_out = False
        return self.frames.popleft()

    def _time_out(self) -> None:
        self.timed_out = True
        self._wake()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class InterBrokerAuth(Protocol):
    """TLS and SASL of the inter-broker listener (:class:`broker.security.client.InterBrokerSecurity`)."""

    @property
    def ssl_context(self) -> ssl.SSLContext | None: ...

    async def authenticate(self, roundtrip: Callable[[bytes], Awaitable[bytes | memoryview]],
                           client_id: str) -> None: ...


class BrokerClient:
    """One connection to one broker, reconnecting on demand.

    ``security`` (TLS context and SASL credentials of the inter-broker listener) is set once by
    the broker at start (one broker per process) when that listener is not PLAINTEXT.
    """

    security: InterBrokerAuth | None = None

    def __init__(self, host: str, port: int, client_id: str, *, connect_timeout: float = 5.0) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self._channel: Channel | None = None
        self._lock = asyncio.Lock()
        self._corr = itertools.count(1)

    def __repr__(self) -> str:
        return f"<BrokerClient {self.host}:{self.port}>"

    async def _ensure(self) -> Channel:
        if self._channel is None or self._channel.closed:
            sec = BrokerClient.security
            loop = asyncio.get_running_loop()
            ssl_ctx = sec.ssl_context if sec is not None else None
            _t, channel = await asyncio.wait_for(
                loop.create_connection(Channel, self.host, self.port, ssl=ssl_ctx,
                                       server_hostname=self.host if ssl_ctx else None), self.connect_timeout)
            self._channel = channel
            if sec is not None:
                try:
                    await asyncio.wait_for(sec.authenticate(channel.roundtrip, self.client_id), self.connect_timeout)
                except BaseException:
                    channel.close()
                    self._channel = None
                    raise
        return self._channel

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._channel = None

    async def send(self, request: ApiMessage, version: int, *, timeout: float = 30.0) -> ApiMessage:
        """Send ``request`` at ``version`` and return the decoded response."""
        async with self._lock:
            try:
                return await asyncio.wait_for(self._send(request, version), timeout)
            except (OSError, TimeoutError, EOFError) as e:
                self.close()
                raise ConnectionError(f"{self.host}:{self.port}: {e or type(e).__name__}") from e

    async def channel(self) -> Channel:
        """The open connection, (re)connected if need be: for a caller that reads its responses
        through a :class:`FrameListener` (it owns this client, so no lock is taken)."""
        channel = self._channel
        if channel is None or channel.closed:
            channel = await self._ensure()  # each of its steps is bounded by connect_timeout
        return channel

    def next_correlation_id(self) -> int:
        return next(self._corr) & 0x7FFFFFFF

    async def send_frame(self, frame: bytes, *, timeout: float = 30.0) -> bytes | memoryview:
        """Send an already framed request (a hot path's hand-written encoder, see
        ``protocol.fetch_codec``) and return the response frame undecoded, header included; the
        caller checks the correlation id it put in. A large response is a writable view of a
        buffer of its own, so its records can be appended without another copy.

        The replica fetchers' path, one call per follower fetch: the timeout is one timer on the
        channel's waiter (``Channel.roundtrip``), neither ``wait_for``, which in Python 3.11 runs
        the round trip in a task of its own each time, nor an ``asyncio.timeout`` context, which
        costs ~6 % of a follower's CPU at 10,000 acks=all messages a second."""
        async with self._lock:
            try:
                channel = self._channel
                if channel is None or channel.closed:
                    deadline = asyncio.get_running_loop().time() + timeout
                    channel = await asyncio.wait_for(self._ensure(), timeout)
                    timeout = max(deadline - asyncio.get_running_loop().time(), 0.0)
                return await channel.roundtrip(frame, timeout)
            except (OSError, TimeoutError, EOFError) as e:
                self.close()
                raise ConnectionError(f"{self.host}:{self.port}: {e or type(e).__name__}") from e

    async def _send(self, request: ApiMessage, version: int) -> ApiMessage:
        channel = await self._ensure()
        corr = next(self._corr) & 0x7FFFFFFF
        request.API_VERSION = version
        request.with_header(correlation_id=corr, client_id=self.client_id)
        payload = await channel.roundtrip(bytes(request.encode(header=True, framed=True)))
        resp_cls = RESPONSE_CLASSES[request.API_KEY]
        response = resp_cls.decode(bytes(payload), version=version, header=True)
        got = response._header.correlation_id if response._header is not None else corr
        if got != corr:
            raise ConnectionError(f"correlation id {got} does not match request {corr}")
        return response
