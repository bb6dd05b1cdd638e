"""The CPUs the broker process runs on (the broker property ``cpu.affinity``).

Theory of operation: empty (the default) leaves the process where the operating system puts it.
A CPU list in taskset(1)'s syntax (``1``, ``0-1``, ``0,2-3``) confines the process, and every
thread it starts later, to those CPUs with sched_setaffinity(2), before the event loop and the
ZooKeeper threads exist. It is what an operator does with ``taskset`` or a cpuset, kept in the
broker's configuration so that ``samsa cluster up --cpus`` can give a local cluster's brokers
CPUs of their own.

Why a broker would want it (issue 26, measured in bench/RESULTS.md): on the 2-vCPU VM this
project is measured on, a TCP round trip between two processes costs ~6.5 us when both run on
one vCPU and ~75 us when they run on different vCPUs (waking a vCPU that halted costs the host
a VM exit), and an acks=all produce on three brokers crosses between brokers four times per
replication round. With the three brokers on one vCPU and the client on the other
(``bench/latency.py --broker-cpus 1``), RF 3 acks=all at 10,000 msg/s had p99 9.2-14 ms instead
of 19-20 ms (Java client) and 12.6-14 ms instead of 36-58 ms (librdkafka); batched throughput
(``bench/replication.py --broker-cpus 1``, RF 3 acks=all) fell from 253k to 218k msg/s, as three
brokers then share one core. A trade for the operator to make, hence off by default.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("samsa.server")

MAX_CPU = 65535  # beyond any kernel's CONFIG_NR_CPUS: a larger number is a typo, not a machine


def parse_cpu_list(spec: str) -> set[int]:
    """``"0,2-3"`` -> {0, 2, 3}; ValueError naming what is wrong."""
    cpus: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        if not part:
            raise ValueError(f"empty item in CPU list {spec!r}")
        lo, sep, hi = part.partition("-")
        try:
            first = int(lo)
            last = int(hi) if sep else first
        except ValueError:
            raise ValueError(f"{part!r} in CPU list {spec!r} is not a CPU number or a range a-b") from None
        if first < 0 or last < first:
            raise ValueError(f"{part!r} in CPU list {spec!r} is not a CPU number or a range a-b")
        if last > MAX_CPU:
            raise ValueError(f"{part!r} in CPU list {spec!r} goes beyond CPU {MAX_CPU}")
        cpus.update(range(first, last + 1))
    return cpus


def apply(spec: str) -> set[int] | None:
    """Confine this process to the CPUs of ``spec`` (empty: leave it alone). Returns the CPUs set,
    or None; ValueError if the list is malformed or names no CPU this process may use."""
    spec = spec.strip()
    if not spec:
        return None
    wanted = parse_cpu_list(spec)
    allowed = os.sched_getaffinity(0)
    usable = wanted & allowed
    if not usable:
        raise ValueError(f"cpu.affinity={spec} names none of the CPUs this process may run on "
                         f"({format_cpus(allowed)})")
    if usable != wanted:
        log.warning("cpu.affinity=%s: CPUs %s are not available to this process; using %s", spec,
                    format_cpus(wanted - allowed), format_cpus(usable))
    os.sched_setaffinity(0, usable)
    log.info("Running on CPUs %s of %s (cpu.affinity)", format_cpus(usable), format_cpus(allowed))
    return usable


def format_cpus(cpus: set[int]) -> str:
    """{2, 0, 1} -> "0,1,2" (how the logs and messages name CPUs)."""
    return ",".join(str(c) for c in sorted(cpus))
