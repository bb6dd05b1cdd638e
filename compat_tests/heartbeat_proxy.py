"""A TCP proxy between stock clients and the broker that loses one ConsumerGroupHeartbeat response.

The broker advertises the proxy (``advertised.listeners``), so every connection of every client
goes through it. The proxy forwards frames unchanged, remembers each request's API key, version
and client id by correlation id, and drops the first ConsumerGroupHeartbeat response to client
``client_id`` whose assignment is smaller than the last one it delivered to that client -- the
response that tells the member to revoke. The client sees its heartbeat time out (librdkafka's
heartbeat timeout is the heartbeat interval), as it did under load in the failed compat run.

Test support only: threads, blocking sockets, no attempt at speed.
"""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any

from protocol.kip848 import ConsumerGroupHeartbeatResponse

CONSUMER_GROUP_HEARTBEAT = 68


def _read_frame(s: socket.socket) -> bytes | None:
    head = _read_exact(s, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    body = _read_exact(s, size)
    return None if body is None else head + body


def _read_exact(s: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = s.recv(n - len(buf))
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class HeartbeatProxy:
    def __init__(self, client_id: str, host: str = "127.0.0.1") -> None:
        self.client_id = client_id
        self.host = host
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, 0))
        self.listener.listen(64)
        self.port: int = self.listener.getsockname()[1]
        self.upstream: tuple[str, int] | None = None
        self.lock = threading.Lock()
        self.delivered: int | None = None  # size of the last assignment delivered to client_id
        self.dropped: list[Any] = []  # the responses lost on purpose
        self.events: list[str] = []  # client_id's heartbeats, for diagnostics
        self.closed = False

    def start(self, upstream_port: int) -> None:
        self.upstream = (self.host, upstream_port)
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.closed = True
        self.listener.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            assert self.upstream is not None
            try:
                up = socket.create_connection(self.upstream)
            except OSError:
                down.close()
                continue
            pending: dict[int, tuple[int, int, str | None]] = {}
            threading.Thread(target=self._requests, args=(down, up, pending), daemon=True).start()
            threading.Thread(target=self._responses, args=(up, down, pending), daemon=True).start()

    def _requests(self, down: socket.socket, up: socket.socket,
                  pending: dict[int, tuple[int, int, str | None]]) -> None:
        while (frame := _read_frame(down)) is not None:
            key, version, corr, n = struct.unpack(">hhih", frame[4:14])
            client_id = None if n < 0 else frame[14:14 + n].decode()
            with self.lock:
                pending[corr] = (key, version, client_id)
            try:
                up.sendall(frame)
            except OSError:
                break
        for s in (down, up):
            s.close()

    def _responses(self, up: socket.socket, down: socket.socket,
                   pending: dict[int, tuple[int, int, str | None]]) -> None:
        while (frame := _read_frame(up)) is not None:
            (corr,) = struct.unpack(">i", frame[4:8])
            with self.lock:
                key, version, client_id = pending.pop(corr, (-1, -1, None))
            if key == CONSUMER_GROUP_HEARTBEAT and client_id == self.client_id and \
                    self._lose(ConsumerGroupHeartbeatResponse.decode(frame[4:], version=version,
                                                                     header=True)):
                continue
            try:
                down.sendall(frame)
            except OSError:
                break
        for s in (down, up):
            s.close()

    def _lose(self, r: Any) -> bool:
        size = None if r.assignment is None else \
            sum(len(t.partitions) for t in r.assignment.topic_partitions)
        with self.lock:
            lose = not self.dropped and size is not None and self.delivered is not None and \
                size < self.delivered
            self.events.append(f"error={r.error_code} epoch={r.member_epoch} assignment={size}"
                               f"{' (DROPPED)' if lose else ''}")
            if lose:
                self.dropped.append(r)
            elif size is not None:
                self.delivered = size
            return lose
