"""Kafka's ``Processor`` for one client connection: framing, the request pipeline, responses in order.

Each connection is an ``asyncio.BufferedProtocol`` (cheaper than streams on small requests):
the transport reads, or decrypts, straight into the buffers of the sans-io
:class:`protocol.framing.FrameDecoder`; whole frames queue up and one task per connection
serves them strictly in order, so responses leave in request order however long a Fetch
long-poll takes (Kafka mutes a channel while a request is in flight; pipelined requests simply
wait their turn). One exception to "wait their turn": a request whose work is done but whose
response waits in a purgatory (an acks=all Produce, :class:`broker.apis.DelayedResponse`) is
parked and the next request is served; responses still leave in request order (see
``_enqueue``). A frame that cannot be read closes that connection only.

Bounded memory per connection: a frame's size prefix above ``socket.request.max.bytes`` closes
that connection before anything is buffered for it; reading stops while ``MAX_QUEUED`` frames
or ``MAX_QUEUED_BYTES`` of request bytes wait to be served, and the serving task does not
take the next request while the previous response has not drained below the transport's
high-water mark. So a client that pipelines requests and never reads its responses holds at
most one response, the queued requests and one partial frame; after that its socket is simply
not read (the kernel's buffers fill and its sends block), as Kafka mutes such a channel.

Each frame is turned into a response by :class:`broker.network.request_channel.RequestChannel`;
what the connection needs of the broker that owns it is :class:`NetworkHost` (the composition
root passes itself), so this module never imports ``broker.server``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from protocol.framing import FrameDecoder, FrameError

from ..apis.responses import DelayedResponse
from ..config.properties import BrokerConfig
from ..metrics.stats import CURRENT_REQUEST, RequestTimer
from ..repeated_warnings import RepeatedWarnings
from ..replica import trace
from .connection_quotas import ConnectionQuotas, ConnectionSlot
from .request_channel import Chunk, FrameHandler, Response

if TYPE_CHECKING:
    from ..metrics import BrokerMetrics
    from ..security.authenticator import SaslAuthenticator
    from ..security.manager import BrokerSecurity, ListenerSecurity
    from ..share.manager import SharePartitionManager

log = logging.getLogger("samsa.server")
# A client sending garbage gets its connection closed each time; the log says so a few times
# per cause and minute, then counts (broker/repeated_warnings.py).
CONNECTION_WARNINGS = RepeatedWarnings(log)


class NetworkHost(Protocol):
    """What the network layer reads from the broker that owns it (Kafka's ``SocketServer`` is
    given the same: the config, the metrics, the credential and quota managers). Attributes the
    broker fills in while it starts (security, metrics, the share partition manager) are read
    when they are needed, never copied at construction."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def metrics(self) -> BrokerMetrics | None: ...

    @property
    def security(self) -> BrokerSecurity: ...

    @property
    def share_partition_manager(self) -> SharePartitionManager | None: ...

    @property
    def connections(self) -> set[KafkaConnection]:
        """The open connections (the metrics read their queues; max.connections sheds from them)."""

    @property
    def connection_quotas(self) -> ConnectionQuotas: ...


class KafkaConnection(asyncio.BufferedProtocol):
    """One client connection. Reads are paused while too many requests (or request bytes) are queued.

    A ``BufferedProtocol``: the transport reads (and with TLS, decrypts) straight into the
    decoder's buffers, so a large Produce is not copied between the socket and the log.
    """

    MAX_QUEUED = 64
    # Request bytes queued before reading pauses: one large Produce still fits (a frame is queued
    # whole), and the bound per connection is this plus one frame (socket.request.max.bytes).
    MAX_QUEUED_BYTES = 4 << 20

    def __init__(self, broker: NetworkHost, channel: FrameHandler, listener: ListenerSecurity | None = None,
                 slot: ConnectionSlot | None = None) -> None:
        self.broker = broker
        self.channel = channel
        self.listener = listener
        self.slot = slot  # Acceptor's ConnectionSlot: released (counted out) once, when the connection ends
        self.decoder = FrameDecoder(broker.config.int("socket.request.max.bytes"))
        # Write fetched records with sendfile(2) instead of pread + write. Needs the default asyncio
        # loop (uvloop has no native sendfile). Off by default: bench/fetch_path.py measured uvloop with
        # one pread per region at ~1.0-1.5 GB/s for ~1 MB fetches against 0.3-0.6 GB/s for asyncio with
        # sendfile, which only wins (~1.2x) on 8 MB fetches; uvloop also serves small requests ~2x faster.
        self.sendfile = bool(broker.config["fetch.sendfile.enable"])
        self.regions_by: str | None = None  # see _regions_by
        self.queue: deque[bytes | memoryview] = deque()
        self.queued_bytes = 0
        self.last_active = 0.0  # loop time of the last read: the least recently active is shed first
        # _serve's wait for the next frame: a bare future, set by _arrived or connection_lost
        # (an asyncio.Event costs more per frame: ~6 % of a broker's CPU at 10,000 acks=all msg/s)
        self.waiter: asyncio.Future[None] | None = None
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Task[None] | None = None
        self.closed = False
        self.reading_paused = False
        self.write_ok = asyncio.Event()
        self.write_ok.set()
        self.peer: tuple[str, int] = ("?", 0)
        # Who is on the other end. Authentication (TLS/SASL) sets these before any
        # handler runs; an unauthenticated PLAINTEXT connection is Kafka's User:ANONYMOUS.
        self.principal = "User:ANONYMOUS"
        self.listener_name = "PLAINTEXT"
        self.security_protocol = "PLAINTEXT"
        self.authenticator: SaslAuthenticator | None = None  # SASL listeners: owns the frames until authenticated
        # When metrics are on: when each queued frame was read (RequestQueueTimeMs starts there).
        self.arrivals: deque[float] | None = deque() if broker.metrics is not None else None
        self.mute_ms = 0  # KIP-219: after the next response, read and serve nothing for this long
        # Responses waiting to be written in request order, behind a DelayedResponse (see _enqueue):
        # (the parked DelayedResponse, or a finished response; request frame, timer, when parked)
        self.inflight: deque[tuple[DelayedResponse | Response, bytes | memoryview, RequestTimer | None,
                                   float]] = deque()
        self.drainer: asyncio.Task[None] | None = None  # a parked response's write that must wait
        self.pumping = False
        self.drained = asyncio.Event()
        self.loop: asyncio.AbstractEventLoop  # the loop serving it, from connection_made

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.loop = asyncio.get_running_loop()
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not subclasses
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = (peer[0], peer[1])
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self.broker.connections.add(self)
        if self.listener is not None and not self.broker.security.on_connection(self, self.listener):
            return
        self.task = self.loop.create_task(self._serve())

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        try:
            frames = self.decoder.buffer_updated(nbytes)
        except FrameError as e:
            self.close(f"malformed frame: {e}")
            return
        if frames:
            self._arrived(frames)

    def _arrived(self, frames: list[bytes | memoryview]) -> None:
        if trace.ON:
            self._trace("in", frames)
        self.queue.extend(frames)
        self.queued_bytes += sum(map(len, frames))
        if self.arrivals is not None:
            self.arrivals.extend([time.perf_counter()] * len(frames))
        self._wake()
        if (len(self.queue) >= self.MAX_QUEUED or self.queued_bytes >= self.MAX_QUEUED_BYTES) \
                and not self.reading_paused and self.transport:
            self.transport.pause_reading()
            self.reading_paused = True

    def _trace(self, name: str, frames: Iterable[bytes | memoryview]) -> None:
        """Produce and Fetch frames in the replication trace (broker/replica/trace.py)."""
        for f in frames:
            api, corr = trace.frame_ids(f)
            if api in (0, 1):
                trace.event(name, api, corr, self.peer[1])

    def _wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _write_chunks_now(self, chunks: list[Chunk]) -> bool:
        """Write a response whose records are file regions (see protocol.fetch_codec) if that needs
        no waiting: False (nothing written) when its regions go by sendfile(2)."""
        transport = self.transport
        assert transport is not None
        mode = self.regions_by
        if mode is None:  # chosen at the first response with regions: the transport is final by then
            mode = self.regions_by = self._regions_by(transport)
        if mode == "tls":  # TLS on pyOpenSSL: read, encrypt and send in slices
            transport.write_regions(chunks)  # type: ignore[attr-defined]
            return True
        if mode == "sendfile":
            return False
        # One pread per region into the socket buffer: no encode-buffer copies.
        try:
            data = [c if isinstance(c, bytes) else c.read() for c in chunks]
        except OSError as e:  # a region cut or unreadable since the fetch chose it (ReadInfo.read)
            self.close(f"cannot send a Fetch response, a fetched region: {e.strerror}")
            return True
        transport.writelines(data)
        return True

    def _regions_by(self, transport: asyncio.Transport) -> str:
        """How this connection sends a response's file regions: "tls" (the pyOpenSSL transport's
        write_regions), "sendfile" or "pread" (one pread per region, then one write)."""
        if getattr(transport, "write_regions", None) is not None:
            return "tls"
        # TLS encrypts: no sendfile.  uvloop has no loop.sendfile (AbstractEventLoop's raises
        # NotImplementedError): only asyncio's own loop sends a file region by sendfile(2).
        if self.sendfile and not self.security_protocol.endswith("SSL") and \
                isinstance(asyncio.get_running_loop(), asyncio.BaseEventLoop):
            return "sendfile"
        return "pread"

    async def _sendfile(self, chunks: list[Chunk]) -> None:
        """Write a response whose file regions go by sendfile(2) (see _write_chunks_now)."""
        transport = self.transport
        assert transport is not None
        loop = asyncio.get_running_loop()
        try:
            for c in chunks:
                if isinstance(c, bytes):
                    transport.write(c)
                elif c.fd < 0:  # a region whose file is opened per read (ReadInfo.read)
                    transport.write(c.read())
                else:
                    with os.fdopen(os.dup(c.fd), "rb") as f:
                        await loop.sendfile(transport, f, c.position, c.size)
        except OSError as e:
            self.close(f"cannot send a Fetch response, a fetched region: {e.strerror}")

    async def _mute(self) -> None:
        """Kafka mutes a throttled client's channel: no reads, no requests served, until the time is up."""
        ms, self.mute_ms = self.mute_ms, 0
        if self.transport is not None and not self.reading_paused:
            self.transport.pause_reading()
        await asyncio.sleep(ms / 1000)
        if self.transport is not None and not self.reading_paused and not self.closed:
            self.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.broker.connections.discard(self)
        if self.broker.share_partition_manager is not None:  # KIP-932: its share sessions end
            self.broker.share_partition_manager.on_connection_closed(self.peer)
        self.queue.clear()
        self.queued_bytes = 0
        if self.slot is not None:
            self.slot.release()
        self._wake()
        self.write_ok.set()
        if self.task is not None:
            self.task.cancel()
        if self.drainer is not None:
            self.drainer.cancel()
        self.inflight.clear()  # their records are appended; only the answers are dropped
        self.drained.set()

    def pause_writing(self) -> None:
        self.write_ok.clear()

    def resume_writing(self) -> None:
        self.write_ok.set()

    def close(self, reason: str) -> None:
        if not self.closed:
            CONNECTION_WARNINGS.warning(reason, self.peer[0], "Closing connection from %s:%d: %s",
                                        self.peer[0], self.peer[1], reason)
            self.closed = True
            if self.slot is not None:  # counted out now: max.connections sees the room at once
                self.slot.release()
            if self.transport is not None:
                self.transport.close()

    async def _serve(self) -> None:
        try:
            while not self.closed:
                if not self.queue:
                    self.waiter = self.loop.create_future()
                    await self.waiter
                    continue
                frame = self.queue.popleft()
                self.queued_bytes -= len(frame)
                if self.reading_paused and len(self.queue) < self.MAX_QUEUED // 2 and \
                        self.queued_bytes < self.MAX_QUEUED_BYTES // 2 and self.transport:
                    self.transport.resume_reading()
                    self.reading_paused = False
                timer = None if self.arrivals is None else RequestTimer(self.arrivals.popleft())
                try:
                    if timer is None:
                        out = await self.channel.handle(frame, self)
                    else:
                        out = await timer.run(self.channel.handle(frame, self))
                except Exception:
                    log.exception("Unexpected error serving a request from %s:%d", *self.peer)
                    self.close("internal error")
                    return
                # The steps below await only when they must (a full queue, a mute, a transport over
                # its high-water mark, a sendfile region): no coroutine per request otherwise.
                if self.inflight or isinstance(out, DelayedResponse):
                    # A response is waiting (acks=all): this one leaves after it. Go on serving.
                    if self._enqueue(out, frame, timer):
                        await self._hold_back()
                    continue
                handled = time.perf_counter() if timer is not None else 0.0
                if not self._write_now(out):
                    assert isinstance(out, list)  # only file regions need the wait
                    await self._sendfile(out)
                if trace.ON:
                    self._trace("out", (frame,))
                if not self.write_ok.is_set():
                    await self.write_ok.wait()
                self._record(frame, timer, handled)
                if self.mute_ms and not self.closed:
                    await self._mute()
        except asyncio.CancelledError:
            pass

    async def _write(self, out: Response) -> None:
        if not self._write_now(out):
            assert isinstance(out, list)  # only file regions need the wait
            await self._sendfile(out)

    async def _written(self, frame: bytes | memoryview, timer: RequestTimer | None, handled: float) -> None:
        """After a response is handed to the transport: wait while it is over its high-water mark
        (the next request is not served meanwhile), then record the request's metrics."""
        if not self.write_ok.is_set():
            await self.write_ok.wait()
        self._record(frame, timer, handled)

    def _record(self, frame: bytes | memoryview, timer: RequestTimer | None, handled: float) -> None:
        if timer is not None and self.broker.metrics is not None:
            self.broker.metrics.request_stats.finish(frame, timer, handled, time.perf_counter(),
                                                     throttle_ms=self.mute_ms)

    # --- responses that wait (DelayedResponse) -----------------------------------------------
    # Kafka mutes a channel for the whole of a request, so a producer with acks=all gets one
    # replication round trip per request on each connection. Here only the work that orders
    # requests (parsing, validation, the append) is serial: a request whose response must wait
    # is parked in ``inflight`` and the next request is served at once. Responses still leave
    # strictly in request order: while anything is parked, every later response queues behind
    # it. ``_pump`` writes the head of the line whenever it is ready: when it is parked and when
    # its delayed operation completes, in the loop turn of the event that completes it (the
    # follower Fetch that moved the high watermark writes the producer's response). Only a
    # write that must wait (the transport over its high-water mark, a sendfile region) goes to a
    # task, ``_drain``. At most MAX_INFLIGHT responses wait; beyond that the serving loop waits
    # too (and reading pauses once MAX_QUEUED frames queue).

    MAX_INFLIGHT = 16

    def _enqueue(self, out: Response | DelayedResponse, frame: bytes | memoryview,
                 timer: RequestTimer | None) -> bool:
        """Park ``out`` in the line and write what is ready; True if serving must then wait
        (:meth:`_hold_back`)."""
        self.inflight.append((out, frame, timer, time.perf_counter() if timer is not None else 0.0))
        if isinstance(out, DelayedResponse) and not out.op.done:
            out.op.on_done(self._pump)
        self._pump()
        return len(self.inflight) >= self.MAX_INFLIGHT or bool(self.mute_ms)

    async def _hold_back(self) -> None:
        """After :meth:`_enqueue`: wait while MAX_INFLIGHT responses are parked, and serve a muted
        connection's next request only once its responses are out and the mute is over."""
        if len(self.inflight) >= self.MAX_INFLIGHT:
            self.drained.clear()
            await self.drained.wait()
        if self.mute_ms:  # KIP-219: muted once the response is out, so the next request waits for both
            while self.inflight and not self.closed:
                self.drained.clear()
                await self.drained.wait()
            if not self.closed:
                await self._mute()

    def _pump(self) -> None:
        """Write the parked responses that are ready, in request order, now."""
        if self.pumping or self.drainer is not None:  # that one goes on once it has written
            return
        self.pumping = True
        try:
            inflight = self.inflight
            while inflight and not self.closed:
                waiting, frame, timer, parked = inflight[0]
                if isinstance(waiting, DelayedResponse):
                    if not waiting.op.done:
                        return
                    token = CURRENT_REQUEST.set(timer)  # the metrics this response notes are its request's
                    try:
                        out = waiting.build()
                    except Exception:
                        log.exception("Unexpected error completing a request from %s:%d", *self.peer)
                        self.close("internal error")
                        return
                    finally:
                        CURRENT_REQUEST.reset(token)
                    if timer is not None:
                        timer.remote += time.perf_counter() - parked
                    inflight[0] = (out, frame, timer, parked)  # built: only its write is left
                else:
                    out = waiting
                handled = time.perf_counter() if timer is not None else 0.0
                if not self.write_ok.is_set() or not self._write_now(out):
                    self.drainer = self.loop.create_task(self._drain(handled))
                    return
                if trace.ON:
                    self._trace("out", (frame,))
                inflight.popleft()
                self._record(frame, timer, handled)
                if len(inflight) < self.MAX_INFLIGHT // 2:
                    self.drained.set()
        finally:
            self.pumping = False

    def _write_now(self, out: Response) -> bool:
        """Write ``out`` unless that needs to wait (a sendfile region): False, nothing written."""
        if out is None or self.closed or self.transport is None:
            return True
        if isinstance(out, bytes):
            self.transport.write(out)
            return True
        return self._write_chunks_now(out)

    async def _drain(self, handled: float) -> None:
        """Write the head of the line (built already) once the transport takes it, then pump on."""
        try:
            if not self.inflight or self.closed:
                return
            out, frame, timer, _parked = self.inflight[0]
            if not self.write_ok.is_set():
                await self.write_ok.wait()
            await self._write(out)  # type: ignore[arg-type]  # _pump built it
            if trace.ON:
                self._trace("out", (frame,))
            if self.inflight:
                self.inflight.popleft()
            await self._written(frame, timer, handled)
            if len(self.inflight) < self.MAX_INFLIGHT // 2:
                self.drained.set()
        except asyncio.CancelledError:
            return
        finally:
            self.drainer = None
            if not self.inflight:
                self.drained.set()
        self._pump()

