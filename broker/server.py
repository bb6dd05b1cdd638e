"""The asyncio broker: sockets, per-connection request pipelines, and the Broker that owns state.

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

Accepting is :class:`Acceptor`'s (Kafka's ``Acceptor``): one task per listener that accepts,
asks :mod:`broker.network.connection_quotas` (max.connections, per-IP limits, creation rates) and only
then hands the socket to the event loop (with TLS, the handshake happens after that).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import logging
import os
import signal
import socket
import time
import uuid
from collections import deque
from typing import Any

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import FrameDecoder, FrameError
from protocol.messages import (
    MalformedRequest,
    RequestHeader,
    UnsupportedVersion,
    decode_body,
    encode_response,
    parse_header,
    response_class,
)

from . import apis, hooks, security
from .apis import DelayedResponse, EncodedResponse, RequestContext
from .cluster.metadata import TopicRegistry
from .config.dynamic import DynamicBrokerConfigs
from .config.properties import BrokerConfig, Listener
from .group_configs import GroupConfigStore
from .hooks import HookedRequest, RequestHook
from .metrics.stats import RequestTimer, note_errors, response_error_counts
from .network.connection_quotas import ConnectionQuotas, ConnectionSlot
from .repeated_warnings import RepeatedWarnings
from .replica.fetch_session import FetchSessionCache
from .replica.replica_manager import ReplicaManager
from .security import openssl_transport
from .security.quotas import WAITING_APIS

log = logging.getLogger("samsa.server")

# Write fetched records with sendfile(2) instead of pread + write. Needs the default asyncio
# loop (uvloop has no native sendfile). Off by default: bench/fetch_path.py measured uvloop with
# one pread per region at ~1.0-1.5 GB/s for ~1 MB fetches against 0.3-0.6 GB/s for asyncio with
# sendfile, which only wins (~1.2x) on 8 MB fetches; uvloop also serves small requests ~2x faster.

# Modules with ``async start(broker)`` / ``async stop(broker)`` that run beside the partitions,
# started in this order after the logs are loaded and stopped in reverse before they close.
COMPONENTS = ("broker.metrics", "groupcoord.plugin", "broker.share.plugin", "txn.plugin", "log.cleaner", "broker.console",
              "broker.schema_registry")
request_log = logging.getLogger("samsa.request")
# A client sending garbage gets its connection closed each time; the log says so a few times
# per cause and minute, then counts (broker/repeated_warnings.py).
CONNECTION_WARNINGS = RepeatedWarnings(log)


class KafkaConnection(asyncio.BufferedProtocol):
    """One client connection. Reads are paused while too many requests (or request bytes) are queued.

    A ``BufferedProtocol``: the transport reads (and with TLS, decrypts) straight into the
    decoder's buffers, so a large Produce is not copied between the socket and the log.
    """

    MAX_QUEUED = 64
    # Request bytes queued before reading pauses: one large Produce still fits (a frame is queued
    # whole), and the bound per connection is this plus one frame (socket.request.max.bytes).
    MAX_QUEUED_BYTES = 4 << 20

    def __init__(self, broker: Broker, listener: Any = None, slot: Any = None) -> None:
        self.broker = broker
        self.listener = listener  # broker.security.manager.ListenerSecurity
        self.slot = slot  # Acceptor's ConnectionSlot: released (counted out) once, when the connection ends
        self.decoder = FrameDecoder(broker.config.int("socket.request.max.bytes"))
        self.sendfile = bool(broker.config["fetch.sendfile.enable"])
        self.queue: deque[bytes | memoryview] = deque()
        self.queued_bytes = 0
        self.last_active = 0.0  # loop time of the last read: the least recently active is shed first
        self.wakeup = asyncio.Event()
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
        self.authenticator: Any = None  # SASL listeners: owns the frames until authenticated
        # When metrics are on: when each queued frame was read (RequestQueueTimeMs starts there).
        self.arrivals: deque[float] | None = deque() if broker.metrics is not None else None
        self.mute_ms = 0  # KIP-219: after the next response, read and serve nothing for this long
        # Responses waiting to be written in request order, behind a DelayedResponse (see _enqueue):
        # (Task or finished response, request frame, timer, when parked)
        self.inflight: deque[tuple[Any, bytes | memoryview, RequestTimer | None, float]] = deque()
        self.drainer: asyncio.Task[None] | None = None
        self.drained = asyncio.Event()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
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
        self.task = asyncio.get_running_loop().create_task(self._serve())

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
        self.queue.extend(frames)
        self.queued_bytes += sum(map(len, frames))
        if self.arrivals is not None:
            self.arrivals.extend([time.perf_counter()] * len(frames))
        self.wakeup.set()
        if (len(self.queue) >= self.MAX_QUEUED or self.queued_bytes >= self.MAX_QUEUED_BYTES) \
                and not self.reading_paused and self.transport:
            self.transport.pause_reading()
            self.reading_paused = True

    async def _write_chunks(self, chunks: list[Any]) -> None:
        """Write a response whose records are file regions (see protocol.fetch_codec)."""
        transport = self.transport
        assert transport is not None
        write_regions = getattr(transport, "write_regions", None)
        if write_regions is not None:  # TLS on pyOpenSSL: read, encrypt and send in slices
            write_regions(chunks)
            return
        loop = asyncio.get_running_loop()
        # TLS encrypts: no sendfile.  uvloop has no loop.sendfile (AbstractEventLoop's raises
        # NotImplementedError): only asyncio's own loop sends a file region by sendfile(2).
        if not self.sendfile or self.security_protocol.endswith("SSL") or not isinstance(loop, asyncio.BaseEventLoop):
            # One pread per region into the socket buffer: no encode-buffer copies.
            try:
                data = [c if isinstance(c, bytes) else c.read() for c in chunks]
            except OSError as e:  # a region cut or unreadable since the fetch chose it (ReadInfo.read)
                self.close(f"cannot send a Fetch response, a fetched region: {e.strerror}")
                return
            transport.writelines(data)
            return
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
        self.wakeup.set()
        self.write_ok.set()
        if self.task is not None:
            self.task.cancel()
        if self.drainer is not None:
            self.drainer.cancel()
        for waiting, *_ in self.inflight:  # their records are appended; only the answers are dropped
            if isinstance(waiting, asyncio.Task):
                waiting.cancel()
        self.inflight.clear()
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
                    self.wakeup.clear()
                    await self.wakeup.wait()
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
                        out = await self.broker.handle_frame(frame, self)
                    else:
                        out = await timer.run(self.broker.handle_frame(frame, self))
                except Exception:
                    log.exception("Unexpected error serving a request from %s:%d", *self.peer)
                    self.close("internal error")
                    return
                if self.inflight or isinstance(out, DelayedResponse):
                    # A response is waiting (acks=all): this one leaves after it. Go on serving.
                    await self._enqueue(out, frame, timer)
                    continue
                handled = time.perf_counter() if timer is not None else 0.0
                await self._write(out)
                await self._written(frame, timer, handled)
                if self.mute_ms and not self.closed:
                    await self._mute()
        except asyncio.CancelledError:
            pass

    async def _write(self, out: bytes | list[Any] | None) -> None:
        if out is not None and not self.closed and self.transport is not None:
            if isinstance(out, bytes):
                self.transport.write(out)
            else:
                await self._write_chunks(out)

    async def _written(self, frame: bytes | memoryview, timer: RequestTimer | None, handled: float) -> None:
        """After a response is handed to the transport: wait while it is over its high-water mark
        (the next request is not served meanwhile), then record the request's metrics."""
        if not self.write_ok.is_set():
            await self.write_ok.wait()
        if timer is not None and self.broker.metrics is not None:
            self.broker.metrics.request_stats.finish(frame, timer, handled, time.perf_counter(),
                                                     throttle_ms=self.mute_ms)

    # --- responses that wait (DelayedResponse) -----------------------------------------------
    # Kafka mutes a channel for the whole of a request, so a producer with acks=all gets one
    # replication round trip per request on each connection. Here only the work that orders
    # requests (parsing, validation, the append) is serial: a request whose response must wait
    # is parked in ``inflight`` and the next request is served at once. Responses still leave
    # strictly in request order: while anything is parked, every later response queues behind
    # it and ``_drain`` writes them as they complete. At most MAX_INFLIGHT responses wait;
    # beyond that the serving loop waits too (and reading pauses once MAX_QUEUED frames queue).

    MAX_INFLIGHT = 16

    async def _enqueue(self, out: Any, frame: bytes | memoryview, timer: RequestTimer | None) -> None:
        if isinstance(out, DelayedResponse):
            waiting: Any = asyncio.get_running_loop().create_task(out.wait)
        else:
            waiting = out  # already complete: it only keeps its place in line
        self.inflight.append((waiting, frame, timer, time.perf_counter()))
        if self.drainer is None:
            self.drainer = asyncio.get_running_loop().create_task(self._drain())
        if len(self.inflight) >= self.MAX_INFLIGHT:
            self.drained.clear()
            await self.drained.wait()
        if self.mute_ms:  # KIP-219: muted once the response is out, so the next request waits for both
            while self.inflight and not self.closed:
                self.drained.clear()
                await self.drained.wait()
            if not self.closed:
                await self._mute()

    async def _drain(self) -> None:
        """Write the parked responses in request order as each completes."""
        try:
            while self.inflight and not self.closed:
                waiting, frame, timer, parked = self.inflight[0]
                if isinstance(waiting, asyncio.Task):
                    try:
                        out = await waiting
                    except asyncio.CancelledError:
                        raise
                    except Exception:
                        log.exception("Unexpected error completing a request from %s:%d", *self.peer)
                        self.close("internal error")
                        return
                    if timer is not None:
                        timer.remote += time.perf_counter() - parked
                else:
                    out = waiting
                handled = time.perf_counter() if timer is not None else 0.0
                await self._write(out)
                self.inflight.popleft()  # only now: until it is written, later responses queue behind it
                await self._written(frame, timer, handled)
                if len(self.inflight) < self.MAX_INFLIGHT // 2:
                    self.drained.set()
        except asyncio.CancelledError:
            pass
        finally:
            self.drainer = None
            self.drained.set()


class Acceptor:
    """Kafka's ``Acceptor`` for one listener: accept, apply the connection quotas, then serve.

    ``max.connections`` and the creation rates hold this task (new connections wait in the
    listen backlog); a client address over ``max.connections.per.ip`` has its new connection
    closed. A connection over its address's ``connection_creation_rate`` quota (KIP-612) is
    never served and is closed when its throttle time is up (Kafka's ``throttledSockets``).
    The TLS handshake runs in its own task, after the connection is counted.
    """

    BACKLOG = 1024

    def __init__(self, broker: Broker, name: str, security: Any) -> None:
        self.broker = broker
        self.name = name
        self.security = security  # broker.security.manager.ListenerSecurity
        self.sockets: list[socket.socket] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.throttled: dict[socket.socket, asyncio.TimerHandle] = {}  # closed when their throttle ends

    async def bind(self, host: str, port: int) -> None:
        """Bind and listen like ``loop.create_server`` (every address of ``host``; empty = all)."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        seen = set()
        for family, stype, proto, _, addr in infos:
            if (family, addr) in seen:
                continue
            seen.add((family, addr))
            sock = socket.socket(family, stype, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(addr)
                sock.listen(self.BACKLOG)
                sock.setblocking(False)
            except OSError as e:
                sock.close()
                for s in self.sockets:
                    s.close()
                raise OSError(e.errno, f"error while attempting to bind on address {addr!r}: {e.strerror}") from None
            self.sockets.append(sock)
        for sock in self.sockets:
            self._spawn(self._run(sock))

    def _spawn(self, coro: Any) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(t)
        t.add_done_callback(self.tasks.discard)

    def close(self) -> None:
        for t in list(self.tasks):
            t.cancel()
        for s in self.sockets:
            s.close()
        for sock, handle in list(self.throttled.items()):
            handle.cancel()
            sock.close()
        self.throttled.clear()

    def _close_throttled(self, sock: socket.socket) -> None:
        self.throttled.pop(sock, None)
        sock.close()

    async def _run(self, lsock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        quotas = self.broker.connection_quotas
        while True:
            try:
                sock, addr = await loop.sock_accept(lsock)
            except OSError as e:  # EMFILE and friends: Kafka logs and keeps accepting
                log.error("Error accepting a connection on listener %s: %s", self.name, e)
                await asyncio.sleep(0.1)
                continue
            ip = str(addr[0])
            try:
                await quotas.wait_for_slot(self.name)
            except BaseException:
                sock.close()
                raise
            throttle_ms = quotas.record_ip_connection_maybe_throttle(self.name, ip, time.monotonic() * 1000)
            if throttle_ms > 0:
                self.throttled[sock] = loop.call_later(throttle_ms / 1000, self._close_throttled, sock)
                continue
            if not quotas.inc(self.name, ip):
                sock.close()
                continue
            slot = ConnectionSlot(quotas, self.name, ip)
            if quotas.total > quotas.max_connections:
                self.broker.close_excess_connections()
            self._spawn(self._start(sock, slot))

    async def _start(self, sock: socket.socket, slot: ConnectionSlot) -> None:
        loop = asyncio.get_running_loop()
        ctx = self.security.ssl_context
        factory = functools.partial(KafkaConnection, self.broker, self.security, slot)
        try:
            if ctx is not None and self.security.openssl_context is not None:
                await openssl_transport.accept(loop, sock, self.security.openssl_context, factory,
                                               read_loop=self.security.read_loop)
            else:
                await loop.connect_accepted_socket(factory, sock, ssl=ctx)
        except asyncio.CancelledError:
            slot.release()
            sock.close()
            raise
        except Exception as e:  # a failed TLS handshake (plaintext on a TLS port, a bad cert) or a reset
            slot.release()
            sock.close()
            if ctx is not None:
                CONNECTION_WARNINGS.warning("ssl-handshake", slot.ip, "Failed authentication with /%s on listener "
                                            "%s (SSL handshake failed: %s)", slot.ip, self.name, e)


class Broker:
    """Owns the broker's state: config, topic registry, partitions, coordinators, listeners."""

    def __init__(self, config: BrokerConfig, request_hook: RequestHook | None = None) -> None:
        self.config = config
        # Tests and fault switches reach into the request dispatch here (broker/hooks.py)
        self.request_hook = request_hook
        self.broker_id = config.broker_id
        self.registry = apis.load_all()
        first_dir = config.log_dirs[0]
        # Cluster mode (zookeeper.connect set): ZooKeeper holds the metadata, the controller decides
        # leaders; see broker.cluster.zk.cluster. Otherwise the single embedded broker owns everything.
        self.zk: Any = None
        self.metadata_cache: Any = None
        self.controller: Any = None
        self.cluster: Any = None
        self.inter_broker_listener: str | None = str(config.get("inter.broker.listener.name") or "") or None
        if self.inter_broker_listener is None and config.get("security.inter.broker.protocol"):
            # Kafka: security.inter.broker.protocol=X means the listener named X
            self.inter_broker_listener = str(config.get("security.inter.broker.protocol")).strip().upper()
        if str(config.get("zookeeper.connect") or "").strip():
            from .cluster.zk.cluster import ZkCluster  # noqa: PLC0415

            self.cluster = ZkCluster(self)
            self.topics: TopicRegistry = self.cluster.topics
        else:
            self.topics = TopicRegistry(first_dir / "samsa-metadata.json")
        self.replica_manager = ReplicaManager(config, self.topics)
        self.topics.listeners.append(self.replica_manager.on_topic_event)
        self.connections: set[KafkaConnection] = set()
        self.acceptors: list[Acceptor] = []
        self.connection_quotas = ConnectionQuotas(config, [lst.name for lst in config.listeners],
                                                  self.inter_broker_listener)
        self.group_coordinator: Any = None
        self.share_coordinator: Any = None  # broker/share/plugin.py
        self.share_partition_manager: Any = None
        self.group_configs: Any = None  # broker/group_configs.py GroupConfigStore
        self.txn_coordinator: Any = None
        self.fetch_sessions = FetchSessionCache(config.int("max.incremental.fetch.session.cache.slots"))
        self.producer_ids: Any = None
        self.metrics: Any = None  # broker.metrics.BrokerMetrics when metrics.listener is set
        self.console: Any = None  # broker/console/, when console.listener is set
        self.schema_registry: Any = None  # broker/schema_registry/, when schema.registry.listeners is set
        self.security: Any = None  # broker.security.manager.BrokerSecurity, built first in start()
        self.authorizer: Any = None  # broker.security: None = no authorizer configured
        self.quotas: Any = None  # broker.security.quotas: None = no client quotas defined
        self.started = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()

    @property
    def cluster_id(self) -> str:
        return self.topics.cluster_id

    def is_cluster_broker(self, broker_id: int) -> bool:
        """Inter-broker requests (follower fetches, the controller's requests) are honoured only
        from brokers registered in this cluster."""
        if self.metadata_cache is None or broker_id < 0:
            return False
        if broker_id in self.metadata_cache.brokers:
            return True
        # not in our view yet (we have just started, or it has just joined): ask ZooKeeper
        from .cluster.zk import zk_data  # noqa: PLC0415

        return self.zk is not None and self.zk.get(zk_data.broker_path(broker_id)) is not None

    def close_excess_connections(self) -> None:
        """Kafka's closeExcessConnections: the protected inter-broker listener took the broker past
        max.connections, so the least recently active connections of the other listeners go."""
        quotas = self.connection_quotas
        excess = quotas.total - quotas.max_connections
        victims = sorted((c for c in self.connections
                          if not c.closed and quotas.max_connections_exceeded(c.listener_name)),
                         key=lambda c: c.last_active)[:max(excess, 0)]
        for c in victims:
            quotas.listeners[c.listener_name].closed_excess += 1
            c.close(f"broker has reached max.connections={quotas.max_connections}; the least recently "
                    f"active connection of listener {c.listener_name} makes room for inter-broker connections")

    @property
    def advertised(self) -> Listener:
        return self.config.advertised_listeners[0]

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        t0 = time.monotonic()
        from .security.manager import BrokerSecurity  # noqa: PLC0415

        self.security = BrokerSecurity(self.config)  # a bad certificate or SASL setting stops us here
        for d in self.config.log_dirs:
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError:
                pass  # the LogManager takes an unusable log dir offline (JBOD)
        if self.cluster is not None:
            await self.cluster.connect()
        self.topics.load()
        self._init_meta_properties()
        self.replica_manager.startup()
        DynamicBrokerConfigs.attach(self)  # KIP-226 dynamic broker configs survive restarts
        self.connection_quotas.reconfigure(self.config)  # with the dynamic max.connections* applied
        self.security.reconfigure()  # TLS listeners whose keystores were set dynamically (KIP-226)
        security.configure(self)  # authorizer and client quotas
        GroupConfigStore.attach(self)  # dynamic group configs, read by the coordinators started next
        if self.cluster is not None:
            from .cluster.zk.cluster import ZkProducerIdManager  # noqa: PLC0415

            self.producer_ids = ZkProducerIdManager(self.cluster.zk, self.broker_id)
        else:
            from txn.producer_ids import ProducerIdManager  # noqa: PLC0415

            self.producer_ids = ProducerIdManager(self.config.log_dirs[0] / "producer-id-block")
        await self._start_components()
        loop = asyncio.get_running_loop()
        for lst in self.config.listeners:
            sec = self.security.listeners[lst.name]
            acceptor = Acceptor(self, lst.name, sec)
            await acceptor.bind(lst.host, lst.port)
            self.acceptors.append(acceptor)
        self._tasks.append(loop.create_task(self._retention_loop()))
        if self.cluster is not None:
            await self.cluster.start()
        self.started.set()
        addrs = ", ".join(f"{lst.host}:{lst.port}" for lst in self.config.listeners)
        log.info("Samsa broker %d started, listening on %s (cluster id %s, log dirs %s) in %.0f ms",
                 self.broker_id, addrs, self.cluster_id,
                 ",".join(str(d) for d in self.config.log_dirs), (time.monotonic() - t0) * 1000)

    def _init_meta_properties(self) -> None:
        if not self.topics.cluster_id:
            self.topics.cluster_id = str(self.config.get("cluster.id") or "") or \
                base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            self.topics._persist()
        for d in self.config.log_dirs:
            mp = d / "meta.properties"
            try:
                if not mp.exists():
                    mp.write_text(f"version=1\ncluster.id={self.cluster_id}\nnode.id={self.broker_id}\n")
            except OSError as e:
                log.error("Cannot write %s: %s", mp, e)

    async def _start_components(self) -> None:
        """Coordinators that live beside the partitions (groups, transactions)."""
        for name in COMPONENTS:
            try:
                mod = __import__(name, fromlist=["start"])
            except ModuleNotFoundError as e:
                if e.name != name:
                    raise
                continue
            start = getattr(mod, "start", None)
            if start is not None:
                await start(self)

    async def _retention_loop(self) -> None:
        interval = self.config.int("log.retention.check.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.replica_manager.retention_pass()
            except Exception:
                log.exception("Retention pass failed")

    async def stop(self) -> None:
        log.info("Samsa broker %d shutting down", self.broker_id)
        if self.cluster is not None:
            await self.cluster.controlled_shutdown()
        if self.schema_registry is not None:
            # its Kafka clients talk to this broker: they leave the group while it still answers
            from .schema_registry import stop as stop_schema_registry  # noqa: PLC0415

            await stop_schema_registry(self)
        for a in self.acceptors:
            a.close()
        for conn in list(self.connections):
            conn.close("broker shutting down")
        for t in self._tasks:
            t.cancel()
        for name in reversed(COMPONENTS):
            try:
                mod = __import__(name, fromlist=["stop"])
            except ModuleNotFoundError:
                continue
            try:
                stop = getattr(mod, "stop", None)
                if stop is not None:
                    await stop(self)
            except Exception:
                log.exception("Error stopping %s", name)
        if self.cluster is not None:
            await self.cluster.stop()
        self.replica_manager.shutdown()
        log.info("Samsa broker %d shut down completed", self.broker_id)

    async def serve_forever(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._stopping.set)
            except (NotImplementedError, RuntimeError):
                pass
        await self.start()
        await self._stopping.wait()
        await self.stop()

    # --- requests -------------------------------------------------------------------------

    async def handle_frame(self, frame: bytes | memoryview,
                           conn: KafkaConnection) -> bytes | list[Any] | DelayedResponse | None:
        if conn.authenticator is not None:  # SASL listeners only: PLAINTEXT pays this one test
            handled, out = conn.authenticator.on_frame(frame)
            if handled:
                return out
        try:
            header = parse_header(frame)
        except MalformedRequest as e:
            conn.close(str(e))
            return None
        spec = self.registry.get(header.api_key)
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
        ctx = RequestContext(self, header, conn.peer[0], conn.peer[1], conn.principal, conn.listener_name,
                             conn.security_protocol)
        if self.request_hook is not None:
            call = HookedRequest(ctx, request, frame, conn)
            fault = self.request_hook.on_request(call)
            if fault is not None:
                handled, response = await hooks.enact(fault, call, spec.handler)
                if handled:
                    return self._encode(ctx, conn, spec, response)
        quotas = self.quotas
        t0 = time.monotonic() if quotas is not None and quotas.enabled else 0.0
        try:
            response = await spec.handler(ctx, request)
            if isinstance(response, DelayedResponse):  # the connection goes on; see _serve
                if t0:
                    self._apply_quotas(ctx, conn, None, t0)
                return DelayedResponse(self._complete_delayed(ctx, conn, spec, response))
            if t0:
                response = self._apply_quotas(ctx, conn, response, t0)
        except Exception:
            response = self._handler_failed(ctx, conn, spec)
        return self._encode(ctx, conn, spec, response)

    async def _complete_delayed(self, ctx: RequestContext, conn: KafkaConnection, spec: Any,
                                delayed: DelayedResponse) -> bytes | list[Any] | None:
        try:
            response = await delayed.wait
        except Exception:
            response = self._handler_failed(ctx, conn, spec)
        return self._encode(ctx, conn, spec, response)

    def _handler_failed(self, ctx: RequestContext, conn: KafkaConnection, spec: Any) -> Any:
        header = ctx.header
        log.exception("Error handling %s v%d from client %r (correlation id %d)", spec.name,
                      header.api_version, header.client_id, header.correlation_id)
        response = error_response(ctx, ErrorCode.UNKNOWN_SERVER_ERROR)
        if response is None:
            conn.close(f"internal error serving {spec.name}")
        return response

    def _encode(self, ctx: RequestContext, conn: KafkaConnection, spec: Any,
                response: Any) -> bytes | list[Any] | None:
        header = ctx.header
        if response is None:
            return None
        if isinstance(response, EncodedResponse):
            return response.chunks
        if self.metrics is not None:  # RequestMetrics ErrorsPerSec: one walk of the response's structs
            note_errors(response_error_counts(response))
        if request_log.isEnabledFor(logging.DEBUG):
            request_log.debug("%s v%d corr=%d client=%r", spec.name, header.api_version,
                              header.correlation_id, header.client_id)
        try:
            return encode_response(header.api_key, header.api_version, header.correlation_id, response)
        except Exception:
            log.exception("Cannot encode %s v%d response for client %r", spec.name, header.api_version,
                          header.client_id)
            conn.close(f"internal error encoding {spec.name}")
            return None

    def _apply_quotas(self, ctx: RequestContext, conn: KafkaConnection, response: Any, t0: float) -> Any:
        """request_percentage (the handler's time; not for requests that wait in a purgatory, see
        quotas.WAITING_APIS) and the KIP-219 throttle: the response carries throttle_time_ms and the
        connection is muted that long."""
        key = ctx.header.api_key
        if key not in WAITING_APIS and not (key == ApiKey.PRODUCE and self.cluster is not None):
            ctx.throttle_ms = max(ctx.throttle_ms, self.quotas.record(
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
            for s in sorted(self.registry.values(), key=lambda s: s.key)])
        return encode_response(ApiKey.API_VERSIONS, 0, header.correlation_id, resp)


def error_response(ctx: RequestContext, code: ErrorCode) -> Any:
    """A response carrying ``code`` at its top-level error field where the schema has one."""
    cls = ctx.response_class
    fields = cls.fields if hasattr(cls, "fields") else {}
    kwargs: dict[str, Any] = {}
    if "error_code" in fields:
        kwargs["error_code"] = int(code)
    try:
        return cls(**kwargs)
    except Exception:
        return None
