#!/usr/bin/env python3
"""What one hop between two processes costs on this machine: a TCP round trip over loopback.

Every acks=all produce on a cluster crosses between processes several times (client -> leader,
leader -> each follower, each follower -> leader, leader -> client), and each crossing wakes the
process it goes to. What that costs is the machine's, not the broker's: on a VM, waking a
process on a vCPU that halted costs the host a VM exit. This script measures it with no broker:
two Python processes, one TCP connection with TCP_NODELAY, one byte back and forth, closed loop,
first with both processes on one CPU, then on two different CPUs (sched_setaffinity), and prints
per round trip: the wall time and the CPU (user + system) of each side.

It is the reference for the broker property ``cpu.affinity`` (broker/cpu_affinity.py) and
``samsa cluster up --cpus``: brokers on the same CPUs hand replication to each other at the first
figure, brokers on different CPUs at the second.

Usage::

    python bench/hop_cost.py                 # 20,000 round trips per case
    python bench/hop_cost.py --round-trips 50000

A measuring tool, not a test: nothing here asserts a cost.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time


def _echo(port: int, cpu: int, n: int) -> None:
    os.sched_setaffinity(0, {cpu})
    c = socket.create_connection(("127.0.0.1", port))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(n):
        c.recv(64)
        c.send(b"x")
    c.close()


def round_trips(cpu_a: int, cpu_b: int, n: int) -> tuple[float, float, float]:
    """(wall us, this side's CPU us, the other side's CPU us) per round trip."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    pid = os.fork()
    if pid == 0:
        try:
            _echo(port, cpu_b, n + 1000)
        finally:
            os._exit(0)
    os.sched_setaffinity(0, {cpu_a})
    s, _ = srv.accept()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(1000):  # warm-up
        s.send(b"x")
        s.recv(64)
    child0 = _cpu_of(pid)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        s.send(b"x")
        s.recv(64)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    child = _cpu_of(pid) - child0
    os.waitpid(pid, 0)
    s.close()
    srv.close()
    return 1e6 * wall / n, 1e6 * cpu / n, 1e6 * child / n


def _cpu_of(pid: int) -> float:
    """User + system seconds of process ``pid`` so far (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--round-trips", type=int, default=20000)
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    print(f"# {len(cpus)} CPUs usable ({','.join(map(str, cpus))}); load {os.getloadavg()[0]:.2f}; "
          f"{args.round_trips} round trips per case; us per round trip")
    cases = [("one CPU", cpus[0], cpus[0])]
    if len(cpus) > 1:
        cases.append(("two CPUs", cpus[0], cpus[1]))
    for name, a, b in cases:
        wall, mine, other = round_trips(a, b, args.round_trips)
        print(f"{name:9s} (CPUs {a},{b}): wall {wall:7.1f}   CPU this side {mine:6.1f}   CPU other side {other:6.1f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
