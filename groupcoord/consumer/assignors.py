"""Server-side assignors (KIP-848): ``uniform`` and ``range``, chosen by ``group.consumer.assignors``
and the client's ``group.remote.assignor``.

An assignor is a pure function from the group spec -- each member's subscribed topic ids and
its current target partitions -- and the subscribed topics' partition counts to a new target
assignment for every member. It never does I/O.

* ``uniform`` (Kafka's ``UniformAssignor``): balance the number of partitions per member, as
  sticky as possible. Each member keeps the partitions of its previous target that it still
  subscribes to (up to a fair share); the rest go to the least-loaded member subscribed to the
  topic; then partitions move from the most- to the least-loaded eligible member while that
  narrows the gap. With identical subscriptions, counts differ by at most one.
* ``range`` (Kafka's ``RangeAssignor``): per topic, the subscribed members in member-id order
  each take a contiguous range of partitions; the first ``partitions % members`` get one more.
  Members with the same subscriptions therefore get the same partition numbers of co-partitioned
  topics.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from .group import Assignment


@dataclass(slots=True)
class MemberSpec:
    subscribed_topic_ids: set[uuid.UUID]
    current: Assignment


class UnsupportedAssignor(ValueError):
    pass


def uniform_assign(members: Mapping[str, MemberSpec],
                   topics: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {m: {} for m in members}
    if not members:
        return out
    load = dict.fromkeys(members, 0)
    owner: dict[tuple[uuid.UUID, int], str] = {}
    eligible: dict[uuid.UUID, list[str]] = {
        t: sorted(m for m, spec in members.items() if t in spec.subscribed_topic_ids) for t in topics}
    total = sum(n for t, n in topics.items() if eligible[t])
    fair = -(-total // len(members))  # ceil: nobody keeps more than this

    def give(m: str, tp: tuple[uuid.UUID, int]) -> None:
        out[m].setdefault(tp[0], set()).add(tp[1])
        owner[tp] = m
        load[m] += 1

    # 1. Stickiness: keep valid previous partitions, up to the fair share.
    for m in sorted(members):
        spec = members[m]
        for t in sorted(spec.current):
            if t not in topics or t not in spec.subscribed_topic_ids:
                continue
            for p in sorted(spec.current[t]):
                tp = (t, p)
                if p < topics[t] and tp not in owner and load[m] < fair:
                    give(m, tp)
    # 2. The rest to the least-loaded eligible member.
    for t in sorted(topics):
        if not eligible[t]:
            continue
        for p in range(topics[t]):
            if (t, p) not in owner:
                give(min(eligible[t], key=lambda m: (load[m], m)), (t, p))
    # 3. Balance: move a partition from a member to an eligible one with at least 2 fewer.
    moved = True
    while moved:
        moved = False
        for m in sorted(members, key=lambda m: (-load[m], m)):
            for t in sorted(out[m]):
                for p in sorted(out[m][t]):
                    target = min(eligible[t], key=lambda x: (load[x], x))
                    if load[target] + 1 < load[m]:
                        out[m][t].discard(p)
                        load[m] -= 1
                        give(target, (t, p))
                        moved = True
                        break
                if moved:
                    break
            if moved:
                break
    return {m: {t: ps for t, ps in a.items() if ps} for m, a in out.items()}


def range_assign(members: Mapping[str, MemberSpec],
                 topics: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {m: {} for m in members}
    for t, n in topics.items():
        subscribers = sorted(m for m, spec in members.items() if t in spec.subscribed_topic_ids)
        if not subscribers or n <= 0:
            continue
        per, extra = divmod(n, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            count = per + (1 if i < extra else 0)
            if count:
                out[m][t] = set(range(start, start + count))
            start += count
    return out


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}


def assignor(name: str):  # type: ignore[no-untyped-def]
    try:
        return ASSIGNORS[name]
    except KeyError:
        raise UnsupportedAssignor(name) from None
