"""Consumer groups in a 3-broker cluster: the group coordinator is the leader of the group's
``__consumer_offsets`` partition (RF 3), and when that broker is SIGKILLed the group moves to the
new leader, which loads the group's committed offsets from its replica. A group of a Java, a
kafka-python and a confluent-kafka consumer keeps consuming with no loss and only the duplicates
its commits allow."""

from __future__ import annotations

from collections import Counter

from compat_tests import test_groups_support as support
from compat_tests.test_groups_java import java_worker  # noqa: F401  (autouse: registers the Java worker)
from compat_tests.test_groups_support import Group, all_values, produce, unique, wait_balanced, wait_consumed
from tests.support.cluster import SamsaCluster
from tests.support.replicas import create_topic, find_coordinator, wait_for, wait_full_isr


def committed_reads(workers: list[support.Worker]) -> Counter[tuple[int, int]]:
    """How many times each (partition, offset) was read and then successfully committed."""
    out: Counter[tuple[int, int]] = Counter()
    for w in workers:
        last: tuple[int, int] | None = None
        for line in list(w.lines):
            f = line.split(" ")
            if f[0] == "MSG":
                last = (int(f[1]), int(f[2]))
            elif f[0] == "COMMITTED" and last == (int(f[1]), int(f[2])):
                out[last] += 1
                last = None
    return out


def test_group_survives_its_coordinator_being_killed(cluster3: SamsaCluster) -> None:
    topic, group = unique("cgrp-t"), unique("cgrp")
    create_topic(cluster3, topic, support.PARTITIONS, 3)
    wait_full_isr(cluster3, topic, 3)
    with Group(cluster3.bootstrap, topic, group) as g:
        ws = [g.start(c, delay_ms=30) for c in ("java", "kafka-python", "confluent-kafka")]
        wait_balanced(ws)
        wait_full_isr(cluster3, "__consumer_offsets", 3, timeout=60)
        first = produce(cluster3.bootstrap, topic, "one", 10)
        wait_consumed(ws, first)
        coordinator = wait_for(lambda: find_coordinator(cluster3, group) + 1, 30, "a coordinator") - 1
        for w in ws:
            w.wait_for(lambda x: len(x.committed()) >= 1, what="a commit")
        cluster3.kill(coordinator)
        second = produce(cluster3.bootstrap, topic, "two", 20)
        wait_for(lambda: find_coordinator(cluster3, group) not in (-1, coordinator), 60,
                 "the group to move to a new coordinator")
        wait_consumed(ws, second, timeout=120)
        counts = all_values(ws)
        # A record may be read again only if no earlier read of it was committed: each
        # (partition, offset) is read-and-then-committed at most once over the whole group.
        twice = {po: n for po, n in committed_reads(ws).items() if n > 1}
        assert not twice, f"records read again after their offset was committed: {sorted(twice)[:5]}; " \
                          f"events: { {w.name: w.lines[-60:] for w in ws} }"
        assert set(counts) == set(first) | set(second)
        cluster3.restart(coordinator)
        third = produce(cluster3.bootstrap, topic, "three", 5)
        wait_consumed(ws, third, timeout=120)
        wait_full_isr(cluster3, topic, 3, timeout=60)
