"""The rig's network: one Linux network namespace per host, veth pairs into one bridge, and the
faults a network can have (iptables drops, tc qdiscs), all made and removed here.

Theory of operation: a run owns a *tag* (``sj<pid>``). Host ``h`` lives in namespace
``samsa-jepsen-<pid>-<h>`` with one interface ``eth0`` (the namespace end of a veth pair whose
other end is enslaved to the bridge ``sj<pid>b``) holding ``198.18.<net>.<n>/24``. The bridge holds
``198.18.<net>.254`` in the root namespace, so clients running here reach every host directly.
Nothing is attached to any real interface, there is no default route in any namespace and no
NAT: a packet from a host can only reach another host of the run or the root namespace's bridge
address. 198.18.0.0/15 is reserved for benchmarking (RFC 2544), so it collides with nothing real.

Faults live inside the hosts' own namespaces, so the root namespace's firewall is never touched:

* a partition is ``iptables -A INPUT -s <peer> -j DROP`` in the host's namespace, for every peer
  it must not hear from, on both sides (what Jepsen's ``drop!`` does); ``heal()`` flushes INPUT;
* a slow or lossy link is a ``tc netem`` qdisc on the host's ``eth0``; where the kernel has no
  netem (this happens: sch_netem is a module), a ``tbf`` rate limit (queueing delay) plus an
  iptables ``statistic`` random drop (loss) stand in, and :meth:`Network.slow` says which.

Stale namespaces of runs whose process is gone are removed (with every process still inside
them), and their small log-dir filesystems (tmpfs mounts whose source is ``samsa-jepsen-<pid>``)
unmounted, by :func:`cleanup_stale`, which every run calls first.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

NS_PREFIX = "samsa-jepsen-"
NETNS_DIR = "/var/run/netns"


class NetnsUnavailable(RuntimeError):
    """Namespaces cannot be made here; ``str()`` is the reason (a test skips with it)."""


def run(cmd: Sequence[str], check: bool = True, timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip() or p.stdout.strip()}")
    return p


def netns_unavailable() -> str | None:
    """None when this process can make namespaces, bridges and iptables rules; else why not."""
    if os.geteuid() != 0:
        return "the Jepsen rig needs root (it makes network namespaces, veth pairs and a bridge)"
    for tool in ("ip", "iptables", "tc"):
        if shutil.which(tool) is None:
            return f"`{tool}` not found: install iproute2 and iptables (`apt-get install iproute2 iptables`)"
    probe = f"{NS_PREFIX}probe-{os.getpid()}"
    p = run(["ip", "netns", "add", probe], check=False)
    if p.returncode != 0:
        return f"cannot create a network namespace here: {p.stderr.strip()}"
    try:
        q = run(["ip", "netns", "exec", probe, "iptables", "-S", "INPUT"], check=False)
        if q.returncode != 0:
            return f"iptables does not work inside a namespace here: {q.stderr.strip()}"
    finally:
        run(["ip", "netns", "del", probe], check=False)
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_namespace(ns: str) -> None:
    """SIGKILL every process inside namespace ``ns`` and delete it (deleting alone leaves them running)."""
    p = run(["ip", "netns", "pids", ns], check=False)
    for line in p.stdout.split():
        try:
            os.killpg(int(line), signal.SIGCONT)
        except (ProcessLookupError, PermissionError, ValueError):
            pass
        try:
            os.kill(int(line), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    run(["ip", "netns", "del", ns], check=False)


def cleanup_stale(owner_alive: bool = True) -> list[str]:
    """Remove namespaces, bridges and mounts this rig made for runs whose process has exited; return them.

    With ``owner_alive=False`` even a live owner's leftovers go (the operator's ``--cleanup``).
    """
    removed: list[str] = []
    names = os.listdir(NETNS_DIR) if os.path.isdir(NETNS_DIR) else []
    for ns in names:
        m = re.match(re.escape(NS_PREFIX) + r"(?:probe-)?(\d+)(?:-|$)", ns)
        if not m:
            continue
        pid = int(m.group(1))
        if owner_alive and pid != os.getpid() and _pid_alive(pid):
            continue
        kill_namespace(ns)
        removed.append(ns)
    try:
        mounts = open("/proc/mounts").read().splitlines()
    except OSError:
        mounts = []
    for line in mounts:
        parts = line.split()
        m = re.match(re.escape(NS_PREFIX) + r"(\d+)$", parts[0]) if len(parts) > 2 else None
        if not m:
            continue
        pid = int(m.group(1))
        if owner_alive and pid != os.getpid() and _pid_alive(pid):
            continue
        run(["umount", "-l", parts[1]], check=False)
        removed.append(parts[1])
    links = run(["ip", "-o", "link", "show", "type", "bridge"], check=False).stdout
    for m in re.finditer(r"^\d+: (sj(\d+)b)[:@]", links, re.M):
        pid = int(m.group(2))
        if owner_alive and pid != os.getpid() and _pid_alive(pid):
            continue
        run(["ip", "link", "del", m.group(1)], check=False)
        removed.append(m.group(1))
    return removed


@dataclass(frozen=True)
class Host:
    name: str      # "zk", "n0", "n1" ...
    ns: str        # its namespace
    ip: str        # its address on the bridge
    veth: str      # the root-namespace end of its veth pair


def _netem_available(ns: str) -> bool:
    p = run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
            check=False)
    if p.returncode == 0:
        run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "lo", "root"], check=False)
        return True
    return False


def _free_subnet(first: int) -> int:
    """The first 198.18.<n>.0/24 (n in 18..217, from ``first`` on) no route of this machine uses yet,
    so two runs at once never share a subnet."""
    used = run(["ip", "-4", "route", "show"], check=False).stdout
    for k in range(200):
        n = 18 + (first - 18 + k) % 200
        if f"198.18.{n}.0/24" not in used:
            return n
    raise RuntimeError("no free 198.18.x.0/24 subnet for the rig")


class Network:
    """The bridge and one namespace per host name; ``close()`` removes all of it."""

    def __init__(self, host_names: Iterable[str]) -> None:
        self.pid = os.getpid()
        self.tag = f"sj{self.pid}"
        self.bridge = f"{self.tag}b"
        self.subnet = _free_subnet(18 + self.pid % 200)   # 198.18.<subnet>.0/24, one per run
        self.client_ip = f"198.18.{self.subnet}.254"
        self.hosts: dict[str, Host] = {}
        for n, name in enumerate(host_names, start=1):
            self.hosts[name] = Host(name, f"{NS_PREFIX}{self.pid}-{name}", f"198.18.{self.subnet}.{n}",
                                    f"{self.tag}h{n}")
        self._netem: bool | None = None
        self._slowed: set[str] = set()

    # -- lifecycle ------------------------------------------------------------------------------
    def create(self) -> Network:
        cleanup_stale()
        try:
            run(["ip", "link", "add", self.bridge, "type", "bridge"])
            run(["ip", "addr", "add", f"{self.client_ip}/24", "dev", self.bridge])
            run(["ip", "link", "set", self.bridge, "up"])
            for h in self.hosts.values():
                peer = f"{self.tag}p"
                run(["ip", "netns", "add", h.ns])
                run(["ip", "link", "add", h.veth, "type", "veth", "peer", "name", peer])
                run(["ip", "link", "set", peer, "netns", h.ns])
                self.exec(h.name, ["ip", "link", "set", peer, "name", "eth0"])
                self.exec(h.name, ["ip", "addr", "add", f"{h.ip}/24", "dev", "eth0"])
                self.exec(h.name, ["ip", "link", "set", "eth0", "up"])
                self.exec(h.name, ["ip", "link", "set", "lo", "up"])
                run(["ip", "link", "set", h.veth, "master", self.bridge])
                run(["ip", "link", "set", h.veth, "up"])
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Kill whatever still runs inside the namespaces, delete them and the bridge."""
        for h in self.hosts.values():
            kill_namespace(h.ns)
            run(["ip", "link", "del", h.veth], check=False)
        run(["ip", "link", "del", self.bridge], check=False)

    def __enter__(self) -> Network:
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- running things inside a host ------------------------------------------------------------
    def prefix(self, host: str) -> list[str]:
        """The argv prefix that runs a command inside host's namespace (``ip netns exec`` execs, no fork)."""
        return ["ip", "netns", "exec", self.hosts[host].ns]

    def exec(self, host: str, cmd: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
        return run([*self.prefix(host), *cmd], check=check)

    def ip(self, host: str) -> str:
        return self.hosts[host].ip

    # -- partitions --------------------------------------------------------------------------------
    def drop(self, host: str, sources: Iterable[str]) -> None:
        """host stops hearing from each source host (one direction; ``cut`` does both)."""
        for src in sources:
            if src != host:
                self.exec(host, ["iptables", "-A", "INPUT", "-s", self.ip(src), "-j", "DROP"])

    def cut(self, a: Iterable[str], b: Iterable[str]) -> None:
        """No packet between any host of a and any host of b, either way."""
        a, b = list(a), list(b)
        for x in a:
            self.drop(x, b)
        for y in b:
            self.drop(y, a)

    def partition(self, components: Sequence[Iterable[str]]) -> None:
        """Hosts talk only within their own component (the root namespace's clients reach everyone)."""
        comps = [list(c) for c in components]
        for i, c in enumerate(comps):
            others = [h for j, o in enumerate(comps) if j != i for h in o]
            self.drop_all(c, others)

    def drop_all(self, hosts: Iterable[str], sources: Iterable[str]) -> None:
        srcs = list(sources)
        for h in hosts:
            self.drop(h, srcs)

    def heal(self) -> None:
        """Every host hears from everyone again, and every link runs at full speed."""
        for h in self.hosts:
            self.exec(h, ["iptables", "-F", "INPUT"], check=False)
        for h in list(self._slowed):
            self.exec(h, ["tc", "qdisc", "del", "dev", "eth0", "root"], check=False)
            self.exec(h, ["iptables", "-F", "OUTPUT"], check=False)
        self._slowed.clear()

    def rules(self) -> dict[str, list[str]]:
        """Each host's INPUT rules (for the history and for tests of the rig itself)."""
        out = {}
        for h in self.hosts:
            out[h] = [line for line in self.exec(h, ["iptables", "-S", "INPUT"]).stdout.splitlines()
                      if line.startswith("-A")]
        return out

    # -- slow and lossy links ----------------------------------------------------------------------
    def netem_available(self) -> bool:
        if self._netem is None:
            self._netem = _netem_available(next(iter(self.hosts.values())).ns)
        return self._netem

    def slow(self, hosts: Iterable[str], delay_ms: int = 50, jitter_ms: int = 50, loss_pct: float = 5.0,
             reorder_pct: float = 10.0) -> str:
        """Delay, drop and reorder packets leaving each host's eth0; returns what was applied."""
        hosts = list(hosts)
        if self.netem_available():
            how = (f"netem delay {delay_ms}ms {jitter_ms}ms loss {loss_pct}% "
                   f"reorder {reorder_pct}% 50%")
            for h in hosts:
                self.exec(h, ["tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", f"{delay_ms}ms",
                              f"{jitter_ms}ms", "loss", f"{loss_pct}%", "reorder", f"{reorder_pct}%", "50%"])
                self._slowed.add(h)
            return how
        # No sch_netem in this kernel: a 2 Mbit/s token bucket (queueing delay under load) and random loss.
        how = f"tbf rate 2mbit latency {delay_ms * 4}ms + iptables random drop {loss_pct}% (no netem here)"
        for h in hosts:
            self.exec(h, ["tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", "2mbit", "burst", "16kb",
                          "latency", f"{delay_ms * 4}ms"])
            self.exec(h, ["iptables", "-A", "OUTPUT", "-o", "eth0", "-m", "statistic", "--mode", "random",
                          "--probability", str(loss_pct / 100.0), "-j", "DROP"])
            self._slowed.add(h)
        return how


def wait_for(cond, timeout: float, interval: float = 0.2) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        try:
            if cond():
                return True
        except Exception:  # noqa: BLE001 - a probe failing means "not yet"
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
