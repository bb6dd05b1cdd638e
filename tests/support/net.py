"""Loopback networking helpers: free ports, a raw ApiVersions probe, and :class:`Conn`, a raw
connection from a chosen loopback source address (for per-address limits and quotas).

The probe is written by hand on purpose (ApiVersions v0 is 4 fields each way):
readiness must not depend on the codec under test in ``protocol/``.
"""

from __future__ import annotations

import socket
import struct
import time

API_VERSIONS_KEY = 18


def free_port(host: str = "127.0.0.1") -> int:
    """Ask the kernel for an unused TCP port by binding port 0.

    There is a small window between closing this socket and the broker binding
    the port; on a test machine that is acceptable.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_accepts(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when a TCP connect to host:port succeeds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Read exactly n bytes or raise ConnectionError on EOF."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def recv_frame(sock: socket.socket) -> bytes:
    """Read one size-prefixed Kafka response frame and return its payload."""
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    if size < 0 or size > 256 * 1024 * 1024:
        raise ConnectionError(f"implausible response size {size}")
    return recv_exact(sock, size)


def api_versions_v0(host: str, port: int, timeout: float = 2.0) -> dict[int, tuple[int, int]]:
    """Send ApiVersions v0 and return {api_key: (min_version, max_version)}.

    Raises on connection failure, a correlation id mismatch or a non-zero
    error code, so a broker that accepts connections but cannot answer is not
    mistaken for a ready one.
    """
    correlation_id = 0x5A5A
    client_id = b"samsa-probe"
    body = struct.pack(">hhih", API_VERSIONS_KEY, 0, correlation_id, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(body)) + body)
        payload = recv_frame(sock)
    corr, error_code, count = struct.unpack_from(">ihi", payload, 0)
    if corr != correlation_id:
        raise ConnectionError(f"correlation id {corr} != {correlation_id}")
    if error_code != 0:
        raise ConnectionError(f"ApiVersions error_code {error_code}")
    versions: dict[int, tuple[int, int]] = {}
    pos = 10
    for _ in range(count):
        key, lo, hi = struct.unpack_from(">hhh", payload, pos)
        pos += 6
        versions[key] = (lo, hi)
    return versions


def wait_until(predicate, timeout: float, interval: float = 0.05) -> bool:
    """Poll predicate() until it is true or timeout seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def api_versions_frame(corr: int = 7) -> bytes:
    body = struct.pack(">hhih", 18, 0, corr, 4) + b"test"
    return struct.pack(">i", len(body)) + body


class Conn:
    """One raw connection, optionally from a given source address (127.0.0.0/8 is all loopback)."""

    def __init__(self, port: int, source: str = "127.0.0.1") -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((source, 0))
        self.sock.settimeout(10)
        self.sock.connect(("127.0.0.1", port))

    def ask(self, timeout: float = 10.0) -> str:
        """ApiVersions round trip: 'ok', 'closed' (the broker closed us) or 'timeout' (not served)."""
        self.sock.settimeout(timeout)
        try:
            self.sock.sendall(api_versions_frame())
            payload = recv_frame(self.sock)
        except TimeoutError:
            return "timeout"
        except (ConnectionError, OSError):
            return "closed"
        assert struct.unpack_from(">ih", payload) == (7, 0)
        return "ok"

    def wait_answer(self, timeout: float) -> str:
        """After a timed-out ask: the late answer, if the broker gets to it."""
        self.sock.settimeout(timeout)
        try:
            payload = recv_frame(self.sock)
        except TimeoutError:
            return "timeout"
        except (ConnectionError, OSError):
            return "closed"
        return "ok" if struct.unpack_from(">ih", payload) == (7, 0) else "bad"

    def close(self) -> None:
        self.sock.close()


def connection_burst(port: int, sources: list[str], seconds: float, every: float = 0.02) -> dict[str, list[str]]:
    """Open a connection from each source address every ``every`` s for ``seconds`` s, each
    sending an ApiVersions at once; then what became of each: 'ok' (served) or 'closed'."""
    opened: dict[str, list[Conn]] = {s: [] for s in sources}
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for s in sources:
            c = Conn(port, s)
            c.sock.sendall(api_versions_frame())
            opened[s].append(c)
        time.sleep(every)
    out = {s: [c.wait_answer(10) for c in conns] for s, conns in opened.items()}
    for conns in opened.values():
        for c in conns:
            c.close()
    return out
