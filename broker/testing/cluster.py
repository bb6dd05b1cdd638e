"""``SamsaBroker(brokers=N)``: a ZooKeeper and N Samsa broker processes, with faults per broker.

Cluster brokers run as child processes (each owns a ZooKeeper session, a controller candidate
and its replica fetchers: one per process, as in production), on free ports, in the
SamsaBroker's temporary folder (``cluster/broker-<id>/`` and ``cluster/broker-<id>.log``).
Needs Apache ZooKeeper and a JDK; without them ``start()`` raises :class:`ClusterUnavailable`
saying how to install them.

Because they are processes, the faults are the real ones: ``kill(i)`` is SIGKILL, ``pause(i)``
SIGSTOP and ``resume(i)`` SIGCONT; ``restart(i)`` stops broker ``i`` with SIGTERM (its
controlled shutdown) unless it is already dead and starts it again with the same id, port and
log dirs. Injected faults and recorded requests live in each child's
:class:`broker.testing.faults.FaultPlan`, reached through its control channel
(:mod:`broker.testing.child` says why a TCP line protocol); a restarted broker is a new
process and starts with no rules and no recorded requests.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path

from ..cluster.zk.server import ZooKeeperNotFound, ZooKeeperServer, ZooKeeperStartError, zookeeper_available
from ..hooks import Fault
from .faults import RecordedRequest, recorded_from_json

CHROOT = "/samsa"


class ClusterUnavailable(RuntimeError):
    """ZooKeeper (or java) is missing, or the cluster did not form; the message says why."""


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ControlClient:
    """The parent's end of one child's control channel (one connection, one request at a time)."""

    def __init__(self, port: int, broker_id: int) -> None:
        self.port = port
        self.broker_id = broker_id
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()

    def call(self, timeout: float = 10.0, **msg: object) -> dict[str, object]:
        with self._lock:
            try:
                if self._sock is None:
                    self._sock = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
                self._sock.settimeout(timeout)
                self._sock.sendall(json.dumps(msg).encode() + b"\n")
                line = self._readline(self._sock)
            except OSError as e:
                self.close()
                raise ConnectionError(f"broker {self.broker_id} does not answer on its control channel "
                                      f"(127.0.0.1:{self.port}: {e}); is it killed or paused?") from e
        out = json.loads(line)
        if not isinstance(out, dict):
            raise ConnectionError(f"broker {self.broker_id}: bad control answer {line!r}")
        if "error" in out:
            raise ValueError(f"broker {self.broker_id}: {out['error']}")
        return out

    @staticmethod
    def _readline(sock: socket.socket) -> bytes:
        buf = bytearray()
        while not buf.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionResetError("control channel closed")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class ChildBroker:
    """One broker process: its properties (kept across restarts), process and control channel."""

    def __init__(self, broker_id: int, folder: Path, properties: dict[str, str], host: str) -> None:
        self.broker_id = broker_id
        self.port = int(properties["listeners"].rsplit(":", 1)[1])
        self.host = host
        self.properties = properties
        self.log_path = folder / f"broker-{broker_id}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.control: ControlClient | None = None
        self.paused = False

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self) -> None:
        control_port = free_port("127.0.0.1")
        cmd = [sys.executable, "-m", "broker.testing.child", str(control_port), str(os.getpid()),
               *(f"{k}={v}" for k, v in self.properties.items())]
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # the same code as this process
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True)
        self.control = ControlClient(control_port, self.broker_id)
        self.paused = False

    def status(self) -> dict[str, object] | None:
        """The child's ``status`` answer, or None while it cannot answer yet."""
        if self.control is None:
            return None
        try:
            return self.control.call(timeout=2.0, op="status")
        except (ConnectionError, ValueError):
            return None

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait_exit(self, timeout: float) -> bool:
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (controlled shutdown), SIGKILL if it has not exited after ``timeout``."""
        if self.paused:
            self.signal(signal.SIGCONT)
            self.paused = False
        self.signal(signal.SIGTERM)
        if not self.wait_exit(timeout):
            self.signal(signal.SIGKILL)
            self.wait_exit(10)
        self._forget()

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.wait_exit(10)
        self._forget()

    def _forget(self) -> None:
        if self.control is not None:
            self.control.close()
            self.control = None
        self.paused = False

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class ClusterRule:
    """An injected fault on one or more cluster brokers (the same interface as faults.Rule)."""

    def __init__(self, fault: Fault, times: int | None, parts: list[tuple[ControlClient, int]]) -> None:
        self.fault = fault
        self.times = times
        self._parts = parts

    @property
    def fired(self) -> int:
        """Times it fired, summed over its brokers (a broker that cannot answer counts nothing)."""
        total = 0
        for client, rid in self._parts:
            try:
                total += int(str(client.call(op="fired", rule=rid)["fired"]))
            except ConnectionError:
                pass
        return total

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.fired >= self.times * len(self._parts)

    def remove(self) -> None:
        for client, rid in self._parts:
            try:
                client.call(op="remove", rule=rid)
            except ConnectionError:
                pass

    def wait_fired(self, n: int | None = None, timeout: float = 30.0) -> int:
        """Wait until the rule has fired ``n`` times in all (default: ``times``); return the count."""
        want = n if n is not None else self.times
        if want is None:
            raise ValueError("wait_fired needs n for a rule without times")
        deadline = time.monotonic() + timeout
        while (fired := self.fired) < want:
            if time.monotonic() > deadline:
                raise TimeoutError(f"rule {self.fault} fired {fired} of {want} times in {timeout} s")
            time.sleep(0.02)
        return fired


class EmbeddedCluster:
    def __init__(self, brokers: int, folder: Path, properties: Mapping[str, str], host: str = "127.0.0.1") -> None:
        if brokers < 1:
            raise ValueError("brokers must be at least 1")
        self.n = brokers
        self.folder = folder / "cluster"
        # the embedded single broker's replication settings of the internal topics do not apply
        self.properties = {k: v for k, v in properties.items()
                           if not k.startswith(("offsets.topic.replication", "transaction.state.log.replication",
                                                "transaction.state.log.min.isr"))}
        self.host = host
        self.zookeeper: ZooKeeperServer | None = None
        self.brokers: dict[int, ChildBroker] = {}

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{b.port}" for b in self.brokers.values())

    def start(self, timeout: float = 90.0) -> None:
        missing = zookeeper_available()
        if missing is not None:
            raise ClusterUnavailable(f"SamsaBroker(brokers={self.n}) needs Apache ZooKeeper and a JDK: {missing}")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.zookeeper = ZooKeeperServer(self.folder / "zookeeper", log_path=self.folder / "zookeeper.log")
        try:
            self.zookeeper.start(timeout=timeout)
            for i in range(self.n):
                props = {
                    "broker.id": str(i),
                    "zookeeper.connect": f"{self.zookeeper.connect_string}{CHROOT}",
                    "listeners": f"PLAINTEXT://{self.host}:{free_port(self.host)}",
                    "log.dirs": str(self.folder / f"broker-{i}"),
                    "offsets.topic.replication.factor": str(min(3, self.n)),
                    "transaction.state.log.replication.factor": str(min(3, self.n)),
                    "transaction.state.log.min.isr": str(min(2, self.n)),
                    **self.properties,
                }
                self.brokers[i] = ChildBroker(i, self.folder, props, self.host)
                self.brokers[i].spawn()
            self._wait_ready(self.brokers.values(), timeout)
        except (ZooKeeperNotFound, ZooKeeperStartError, ClusterUnavailable) as e:
            self.stop()
            raise ClusterUnavailable(str(e)) from e
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, which: Iterable[ChildBroker], timeout: float) -> None:
        """Each broker has started and its metadata cache lists every broker that runs."""
        deadline = time.monotonic() + timeout
        pending = list(which)
        while pending:
            want = sorted(b.broker_id for b in self.brokers.values() if b.alive and not b.paused)
            for b in list(pending):
                if not b.alive:
                    raise ClusterUnavailable(f"broker {b.broker_id} exited ({b.proc and b.proc.returncode}); "
                                             f"{b.log_path}:\n{b.tail()}")
                st = b.status()
                if st is not None and st.get("started") and st.get("brokers") == want:
                    pending.remove(b)
            if pending:
                if time.monotonic() > deadline:
                    raise ClusterUnavailable(f"broker(s) {[b.broker_id for b in pending]} not ready after "
                                             f"{timeout:g} s; see the logs in {self.folder}")
                time.sleep(0.1)

    def broker(self, broker_id: int) -> ChildBroker:
        try:
            return self.brokers[broker_id]
        except KeyError:
            raise ValueError(f"no broker {broker_id}: this cluster has brokers {sorted(self.brokers)}") from None

    def stop(self) -> None:
        for b in self.brokers.values():
            if b.paused:
                b.signal(signal.SIGCONT)
                b.paused = False
        for b in self.brokers.values():
            b.stop()
        if self.zookeeper is not None:
            self.zookeeper.stop()
            self.zookeeper = None

    # --- per-broker faults ---------------------------------------------------------------
    def kill(self, broker_id: int) -> None:
        self.broker(broker_id).kill()

    def pause(self, broker_id: int) -> None:
        b = self.broker(broker_id)
        b.signal(signal.SIGSTOP)
        b.paused = True

    def resume(self, broker_id: int) -> None:
        b = self.broker(broker_id)
        b.signal(signal.SIGCONT)
        b.paused = False

    def restart(self, broker_id: int, timeout: float = 90.0) -> None:
        b = self.broker(broker_id)
        if b.alive:
            b.stop()
        b.spawn()
        self._wait_ready([b], timeout)

    # --- injected faults and recorded requests -------------------------------------------
    def _targets(self, broker_id: int | None) -> list[ChildBroker]:
        targets = list(self.brokers.values()) if broker_id is None else [self.broker(broker_id)]
        down = [b.broker_id for b in targets if b.control is None]
        if down:
            raise RuntimeError(f"broker(s) {down} are not running: restart them first")
        return targets

    def inject(self, fault: Fault, api: int | None, topic: str | None, times: int | None,
               broker_id: int | None) -> ClusterRule:
        parts = []
        for b in self._targets(broker_id):
            assert b.control is not None
            rid = b.control.call(op="add", fault=asdict(fault), api=api, topic=topic, times=times)["rule"]
            parts.append((b.control, int(str(rid))))
        return ClusterRule(fault, times, parts)

    def clear_faults(self) -> None:
        for b in self.brokers.values():
            if b.control is not None and not b.paused:
                b.control.call(op="clear")

    def requests(self, api: int | None, topic: str | None, broker_id: int | None) -> list[RecordedRequest]:
        out: list[RecordedRequest] = []
        for b in self._targets(broker_id):
            assert b.control is not None
            got = b.control.call(op="requests", api=api, topic=topic)["requests"]
            out += [recorded_from_json(d, b.broker_id) for d in (got if isinstance(got, list) else [])]
        return sorted(out, key=lambda r: r.at)  # CLOCK_MONOTONIC: one clock for all processes

    def clear_requests(self) -> None:
        for b in self.brokers.values():
            if b.control is not None and not b.paused:
                b.control.call(op="clear_requests")
