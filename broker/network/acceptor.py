"""Kafka's ``Acceptor``: one task per listener that accepts, applies the connection quotas, then serves.

It asks :mod:`broker.network.connection_quotas` (max.connections, per-IP limits, creation rates)
and only then hands the socket to the event loop as a :class:`broker.network.connection.KafkaConnection`
(with TLS, the handshake happens after that, in its own task).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import time
from collections.abc import Coroutine

from ..security.manager import ListenerSecurity
from .connection import CONNECTION_WARNINGS, KafkaConnection, NetworkHost
from .connection_quotas import ConnectionSlot
from .request_channel import FrameHandler

log = logging.getLogger("samsa.server")


class Acceptor:
    """Kafka's ``Acceptor`` for one listener: accept, apply the connection quotas, then serve.

    ``max.connections`` and the creation rates hold this task (new connections wait in the
    listen backlog); a client address over ``max.connections.per.ip`` has its new connection
    closed. A connection over its address's ``connection_creation_rate`` quota (KIP-612) is
    never served and is closed when its throttle time is up (Kafka's ``throttledSockets``).
    The TLS handshake runs in its own task, after the connection is counted.
    """

    BACKLOG = 1024

    def __init__(self, broker: NetworkHost, channel: FrameHandler, name: str, security: ListenerSecurity) -> None:
        self.broker = broker
        self.channel = channel
        self.name = name
        self.security = security
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

    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
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
                self.close_excess_connections()
            self._spawn(self._start(sock, slot))

    async def _start(self, sock: socket.socket, slot: ConnectionSlot) -> None:
        loop = asyncio.get_running_loop()
        ctx = self.security.ssl_context
        factory = functools.partial(KafkaConnection, self.broker, self.channel, self.security, slot)
        try:
            if ctx is not None and self.security.openssl_context is not None:
                await self.security.accept_tls(loop, sock, factory)  # pyOpenSSL, loaded by TLS listeners only
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


    def close_excess_connections(self) -> None:
        """Kafka's closeExcessConnections: the protected inter-broker listener took the broker past
        max.connections, so the least recently active connections of the other listeners go."""
        quotas = self.broker.connection_quotas
        excess = quotas.total - quotas.max_connections
        victims = sorted((c for c in self.broker.connections
                          if not c.closed and quotas.max_connections_exceeded(c.listener_name)),
                         key=lambda c: c.last_active)[:max(excess, 0)]
        for c in victims:
            quotas.listeners[c.listener_name].closed_excess += 1
            c.close(f"broker has reached max.connections={quotas.max_connections}; the least recently "
                    f"active connection of listener {c.listener_name} makes room for inter-broker connections")
