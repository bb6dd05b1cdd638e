"""Replica placement as Kafka's AdminUtils does it (pure functions, no broker needed)."""

from __future__ import annotations

import itertools
from collections import Counter

from broker.cluster.zk.topics import assign_replicas, assign_replicas_rack_aware, rack_alternated


def test_rack_alternated_order() -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "a"}
    assert rack_alternated(racks) == [0, 2, 4, 1, 3, 5]


def test_rack_aware_puts_each_replica_on_another_rack() -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    for start, shift in itertools.product(range(6), range(6)):
        a = assign_replicas_rack_aware(racks, 12, 3, start_index=start, shift=shift)
        for replicas in a.values():
            assert len(set(replicas)) == 3
            assert len({racks[r] for r in replicas}) == 3, (start, shift, replicas)
        leaders = Counter(r[0] for r in a.values())
        assert max(leaders.values()) - min(leaders.values()) <= 1, "leaders spread evenly"


def test_more_replicas_than_racks_still_uses_every_rack() -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: "b"}
    for replicas in assign_replicas_rack_aware(racks, 8, 3, start_index=1, shift=2).values():
        assert {racks[r] for r in replicas} == {"a", "b"} and len(set(replicas)) == 3


def test_rack_unaware_spreads_leaders_and_followers() -> None:
    a = assign_replicas([1, 2, 3], 6, 3, start_index=0, shift=0)
    assert a == {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2], 3: [1, 3, 2], 4: [2, 1, 3], 5: [3, 2, 1]}


def test_a_cluster_with_racks_places_replicas_across_them(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    from tests.support.replicas import create_topic, partitions, wait_full_isr

    racks = {0: "r1", 1: "r1", 2: "r2"}
    cluster = cluster_factory(3, broker_overrides={b: {"broker.rack": r} for b, r in racks.items()})
    cluster.wait_for_brokers(3)
    create_topic(cluster, "racked", 6, 2)
    wait_full_isr(cluster, "racked", 2)
    for p in partitions(cluster, "racked").values():
        assert {racks[r] for r in p.replicas} == {"r1", "r2"}, p.replicas
    md = cluster.metadata(0, [])
    assert {b.node_id: b.rack for b in md.brokers} == racks
