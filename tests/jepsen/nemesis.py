"""Nemeses: the faults a run injects, each with a ``start`` (inject) and a ``stop`` (heal).

Theory of operation: a :class:`Schedule` thread walks a seeded, shuffled cycle of the chosen
kinds (every kind once before any repeats, so a short run still sees them all): it waits a quiet
spell, starts one nemesis, holds it, stops it, and logs both ends to the history as ``info`` ops
of process ``nemesis`` (``f`` ``start``/``stop``, ``value`` saying what was done to whom). The
``stop`` line is written once the heal is complete (a killed broker answers again, ZooKeeper
serves again), so the checker measures recovery from the moment the fault was gone. When the run
ends, the active nemesis is stopped and :func:`heal_all` undoes anything left.

Partitions are iptables drops inside the hosts' namespaces (``net.py``): the clients, in the root
namespace, keep reaching every broker unless a kind says otherwise, which is what makes a leader
cut from its followers (or from ZooKeeper) dangerous: it still takes writes.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.rawclient import RawClient, build_batch

from .history import History
from .rig import Rig
from .workload import TOPIC


class Nemesis:
    name = "nemesis"

    def __init__(self, rig: Rig, rng: random.Random) -> None:
        self.rig, self.rng = rig, rng

    def brokers(self) -> list[str]:
        return [f"n{i}" for i in range(self.rig.size)]

    def start(self) -> dict[str, Any]:
        raise NotImplementedError

    def stop(self) -> dict[str, Any]:
        self.rig.net.heal()
        return {}


class IsolateBroker(Nemesis):
    """One broker cut from ZooKeeper and every other broker; clients still reach it."""

    name = "partition-one"

    def target(self) -> str:
        return self.rng.choice(self.brokers())

    def start(self) -> dict[str, Any]:
        b = self.target()
        others = [h for h in self.rig.net.hosts if h != b]
        self.rig.net.cut([b], others)
        return {"isolated": b, "from": others}


class IsolateController(IsolateBroker):
    name = "partition-controller"

    def target(self) -> str:
        try:
            return f"n{self.rig.controller_id()}"
        except Exception:  # noqa: BLE001 - no controller known right now: any broker
            return super().target()


class CutLeader(Nemesis):
    """A partition leader cut from its followers (all other brokers), not from ZooKeeper or clients."""

    name = "partition-leader"

    def start(self) -> dict[str, Any]:
        try:
            leaders = self.rig.leaders(TOPIC)
            p = self.rng.choice(sorted(leaders))
            leader = leaders[p][0]
        except Exception:  # noqa: BLE001
            p, leader = None, int(self.rng.choice(self.brokers())[1:])
        if leader is None or leader < 0:
            leader = int(self.rng.choice(self.brokers())[1:])
        b = f"n{leader}"
        followers = [h for h in self.brokers() if h != b]
        self.rig.net.cut([b], followers)
        return {"leader": b, "partition": p, "cut_from": followers}


class CutZooKeeper(Nemesis):
    """One broker cut from ZooKeeper only (its peers and the clients still reach it)."""

    name = "partition-zk"

    def start(self) -> dict[str, Any]:
        b = self.rng.choice(self.brokers())
        self.rig.net.cut([b], ["zk"])
        return {"broker": b}


class MajoritySplit(Nemesis):
    """Brokers split into a minority and a majority, ZooKeeper on one side; clients see both sides."""

    name = "partition-majority"

    def start(self) -> dict[str, Any]:
        bs = self.brokers()
        self.rng.shuffle(bs)
        k = len(bs) // 2
        minority, majority = bs[:k], bs[k:]
        if self.rng.random() < 0.5:
            majority.append("zk")
        else:
            minority.append("zk")
        self.rig.net.partition([minority, majority])
        return {"components": [sorted(minority), sorted(majority)]}


class BridgePartition(Nemesis):
    """Jepsen's bridge: two halves that cannot talk, and one host in the middle that talks to both."""

    name = "partition-bridge"

    def start(self) -> dict[str, Any]:
        hosts = list(self.rig.net.hosts)
        self.rng.shuffle(hosts)
        mid = len(hosts) // 2
        bridge = hosts[mid]
        a, b = hosts[:mid], hosts[mid + 1:]
        self.rig.net.cut(a, b)
        return {"side_a": sorted(a), "bridge": bridge, "side_b": sorted(b)}


class SlowNet(Nemesis):
    """Every broker's link delayed, lossy and reordering (tc netem), or rate-limited and lossy without netem."""

    name = "slow-net"

    def start(self) -> dict[str, Any]:
        how = self.rig.net.slow(self.brokers())
        return {"hosts": self.brokers(), "how": how}


class Pause(Nemesis):
    """SIGSTOP one broker (a GC pause, a hung VM), SIGCONT at the heal."""

    name = "pause"

    def start(self) -> dict[str, Any]:
        self.i = self.rng.randrange(self.rig.size)
        self.rig.brokers[self.i].pause()
        return {"broker": f"n{self.i}"}

    def stop(self) -> dict[str, Any]:
        self.rig.brokers[self.i].resume()
        return {"broker": f"n{self.i}"}


class Kill(Nemesis):
    """SIGKILL one broker; the heal starts it again on the same address and data."""

    name = "kill"

    def start(self) -> dict[str, Any]:
        self.i = self.rng.randrange(self.rig.size)
        self.rig.brokers[self.i].kill()
        return {"broker": f"n{self.i}"}

    def stop(self) -> dict[str, Any]:
        self.rig.brokers[self.i].start(90.0)
        return {"broker": f"n{self.i}"}


class ZooKeeperRestart(Nemesis):
    """ZooKeeper killed (SIGKILL) and, at the heal, started again with its data."""

    name = "zk-restart"

    def start(self) -> dict[str, Any]:
        self.rig.zookeeper.kill()
        return {}

    def stop(self) -> dict[str, Any]:
        self.rig.zookeeper.start(90.0)
        return {}


def fill_disk(path: Path) -> int:
    """Create ``path`` and grow it until its filesystem has not a byte left; return its size."""
    st = os.statvfs(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)   # unbuffered: nothing left to flush
    try:
        try:
            os.posix_fallocate(fd, 0, max(st.f_bavail * st.f_frsize, 1))
        except OSError:
            pass
        chunk = b"\0" * (1 << 16)
        try:
            while True:   # whatever fallocate left (or could not reserve)
                os.write(fd, chunk)
        except OSError:
            pass
    finally:
        os.close(fd)
    return path.stat().st_size


class DiskFull(Nemesis):
    """One broker's log dir (a small tmpfs, ``Rig(disk_mb=...)``) filled to the last byte.

    The broker must stop writing there and answer KAFKA_STORAGE_ERROR for the partitions in it
    (Kafka takes the directory offline until a restart) without crashing or corrupting the log.
    The heal frees the space and, if the directory went offline, restarts the broker, which must
    come back with its log intact. ``stop`` reports whether the process survived the full disk.
    """

    name = "disk-full"
    FILLER = ".jepsen-filler"

    def start(self) -> dict[str, Any]:
        if not self.rig.disk_mb:
            raise RuntimeError("disk-full needs the rig's log dirs on small filesystems (Rig(disk_mb=...))")
        self.i = self.rng.randrange(self.rig.size)
        b = self.rig.brokers[self.i]
        self.log_mark = len(b.log_text())
        self.path = b.data_dir / self.FILLER
        fill_disk(self.path)
        probe = self._probe(b)
        st = os.statvfs(b.data_dir)
        return {"broker": f"n{self.i}", "filled_bytes": self.path.stat().st_size,
                "free_bytes_left": st.f_bavail * st.f_frsize, **probe}

    def _probe(self, b: Any) -> dict[str, Any]:
        """One acks=all produce (a null-valued record, which readers skip) to a partition the full
        broker leads: what a client is told. Kafka's answer is KAFKA_STORAGE_ERROR (56)."""
        try:
            leaders = self.rig.leaders(TOPIC)
            mine = sorted(p for p, (ldr, _r, _i) in leaders.items() if ldr == self.i)
            if not mine:
                return {"probe": "the broker leads no partition of the topic"}
            with RawClient(b.host, b.port, timeout=15.0) as c:
                # a 16 KiB key: more than the free part of the segment's last page, so the write needs new space
                code, _off = c.produce(TOPIC, mine[0], build_batch([(b"disk-full-probe" * 1100, None, [])]))
            return {"probe_partition": mine[0], "probe_error_code": code}
        except Exception as e:  # noqa: BLE001 - the probe is evidence, not the fault
            return {"probe": f"failed: {e!r}"[:200]}

    def stop(self) -> dict[str, Any]:
        b = self.rig.brokers[self.i]
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        survived = b.is_running()
        went_offline = "is offline" in b.log_text()[self.log_mark:]
        if not survived or went_offline:
            b.kill()
            b.start(90.0)
        return {"broker": f"n{self.i}", "survived": survived, "dir_went_offline": went_offline,
                "restarted": not survived or went_offline}


class Combined(Nemesis):
    """Two different kinds at once (say a leader cut from its followers while another broker is
    paused), started in order and healed in reverse. Not disk-full: a broker killed while its disk
    is full would be restarted onto the full disk."""

    name = "combined"

    def start(self) -> dict[str, Any]:
        pool = sorted(k for k in KINDS if k not in (self.name, "disk-full"))
        first, second = self.rng.sample(pool, 2)
        self.parts = [KINDS[first](self.rig, self.rng), KINDS[second](self.rig, self.rng)]
        done = []
        for n in self.parts:
            done.append({"kind": n.name, **n.start()})
        return {"parts": done}

    def stop(self) -> dict[str, Any]:
        healed = []
        for n in reversed(self.parts):
            healed.append({"kind": n.name, **n.stop()})
        return {"parts": healed}


KINDS: dict[str, Callable[[Rig, random.Random], Nemesis]] = {
    cls.name: cls for cls in (IsolateBroker, IsolateController, CutLeader, CutZooKeeper, MajoritySplit,
                              BridgePartition, SlowNet, Pause, Kill, ZooKeeperRestart, DiskFull, Combined)
}


def heal_all(rig: Rig) -> None:
    """Undo every fault: flush the drops and qdiscs, resume and restart brokers, start ZooKeeper."""
    rig.net.heal()
    if not rig.zookeeper.is_running():
        rig.zookeeper.start(90.0)
    else:
        rig.zookeeper.resume()
    for b in rig.brokers:
        if b.is_running():
            b.resume()
        else:
            b.start(90.0)


class Schedule(threading.Thread):
    """Starts and stops nemeses at random (seeded) until ``stop_event``; heals everything at the end."""

    def __init__(self, rig: Rig, hist: History, kinds: list[str], rng: random.Random, stop: threading.Event,
                 quiet: tuple[float, float] = (5.0, 10.0), hold: tuple[float, float] = (8.0, 15.0)) -> None:
        super().__init__(daemon=True, name="nemesis")
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise ValueError(f"unknown nemesis {unknown}; known: {sorted(KINDS)}")
        self.rig, self.hist, self.kinds, self.rng, self.stop_event = rig, hist, list(kinds), rng, stop
        self.quiet, self.hold = quiet, hold
        self.error: BaseException | None = None
        self.done: list[str] = []

    def run(self) -> None:
        try:
            cycle: list[str] = []
            while not self.stop_event.wait(self.rng.uniform(*self.quiet)):
                if not cycle:
                    cycle = list(self.kinds)
                    self.rng.shuffle(cycle)
                kind = cycle.pop(0)
                nem = KINDS[kind](self.rig, self.rng)
                what = nem.start()
                self.hist.add("info", "nemesis", "start", {"kind": kind, **what})
                try:
                    self.stop_event.wait(self.rng.uniform(*self.hold))
                finally:
                    healed = nem.stop()
                    self.hist.add("info", "nemesis", "stop", {"kind": kind, **healed})
                    self.done.append(kind)
        except BaseException as e:  # noqa: BLE001 - reported by the runner
            self.error = e
            self.hist.add("info", "nemesis", "error", repr(e)[:500])
        finally:
            try:
                heal_all(self.rig)
            except BaseException as e:  # noqa: BLE001
                self.error = self.error or e
