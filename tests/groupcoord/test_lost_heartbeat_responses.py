"""KIP-848 heartbeats whose responses are lost, over a real socket to a live broker.

A client whose ConsumerGroupHeartbeat times out never sees the coordinator's answer, yet the
coordinator applied it. These tests drive raw ConsumerGroupHeartbeat v1 requests the way the
stock clients do and "lose" chosen responses (the request is sent and answered; the simulated
client ignores the answer):

* :class:`Member` heartbeats like librdkafka 2.x: TopicPartitions is sent only with a join or
  rejoin (``[]``), in the heartbeat that acknowledges a new assignment, or in a full request;
  after a timed-out heartbeat it sends a plain one again (no full request). ``full_after_error``
  makes it behave like the Java client instead (every field after any failure).
* A client applies an assignment at once (revokes, then takes the new partitions) and reports
  what it owns in its next heartbeat.

Each test asserts the outcome the stock clients need: within a few heartbeat rounds every member
holds a disjoint, even share of the six partitions and the group is Stable -- in particular the
members waiting for a partition get it once its old owner stops reporting it, never only after
the old owner's rebalance timeout.
"""

from __future__ import annotations

import uuid
from typing import Any

from protocol.kip848 import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from tests.groupcoord.test_wire import client, create_topic
from tests.support.rawclient import RawClient

NONE, FENCED_MEMBER_EPOCH = 0, 110
PARTITIONS = 6
TP = ConsumerGroupHeartbeatRequest.TopicPartitions
Partitions = set[tuple[uuid.UUID, int]]


class Member:
    """One simulated consumer: its member id, the epoch and partitions it believes it has, and
    whether its next heartbeat must report them."""

    def __init__(self, c: RawClient, group: str, topic: str, name: str, *,
                 full_after_error: bool = False) -> None:
        self.c, self.group, self.topic, self.member_id = c, group, topic, name
        self.full_after_error = full_after_error
        self.epoch = 0
        self.owned: Partitions = set()
        self.report = True  # TopicPartitions in the next heartbeat
        self.full = True  # every field in the next heartbeat
        self.log: list[str] = []

    def request(self, *, epoch: int | None = None, owned: Partitions | None = None,
                report: bool | None = None, full: bool | None = None) -> Any:
        epoch = self.epoch if epoch is None else epoch
        owned = self.owned if owned is None else owned
        full = self.full if full is None else full
        report = (self.report or full) if report is None else report
        by_topic: dict[uuid.UUID, list[int]] = {}
        for t, p in sorted(owned):
            by_topic.setdefault(t, []).append(p)
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=epoch, instance_id=None,
            rack_id=None, rebalance_timeout_ms=300_000 if full or epoch == 0 else -1,
            subscribed_topic_names=[self.topic] if full or epoch == 0 else None,
            subscribed_topic_regex=None, server_assignor="uniform" if full or epoch == 0 else None,
            topic_partitions=[TP(topic_id=t, partitions=ps) for t, ps in by_topic.items()]
            if report or epoch == 0 else None)

    def send(self, req: Any) -> Any:
        r = self.c.roundtrip(req, 1, ConsumerGroupHeartbeatResponse)
        got = None if r.assignment is None else sorted(
            p for t in r.assignment.topic_partitions for p in t.partitions)
        sent = None if req.topic_partitions is None else sorted(
            p for t in req.topic_partitions for p in t.partitions)
        self.log.append(f"e{req.member_epoch} owned={sent} -> err={r.error_code} "
                        f"e{r.member_epoch} assignment={got}")
        return r

    def beat(self, *, lose: bool = False, **kw: Any) -> Any:
        """One heartbeat; with ``lose`` the client never sees the answer (its request timed out)."""
        req = self.request(**kw)
        r = self.send(req)
        if lose:
            self.log[-1] += " (LOST)"
            if self.full_after_error:
                self.full = True
            return r
        if r.error_code == FENCED_MEMBER_EPOCH:
            # Abandon everything and rejoin with epoch 0 and the same member id (KIP-1082).
            self.epoch, self.owned, self.report, self.full = 0, set(), True, True
            return r
        assert r.error_code == NONE, (self.member_id, r)
        self.epoch = r.member_epoch
        self.report = self.full = False
        if r.assignment is not None:
            new = {(t.topic_id, p) for t in r.assignment.topic_partitions for p in t.partitions}
            if new != self.owned:
                self.owned = new
                self.report = True  # the next heartbeat acknowledges it
        return r

    @property
    def partitions(self) -> set[int]:
        return {p for _, p in self.owned}


def describe(c: RawClient, group: str) -> Any:
    return c.roundtrip(ConsumerGroupDescribeRequest(group_ids=[group],
                                                    include_authorized_operations=False),
                       1, ConsumerGroupDescribeResponse).groups[0]


def balanced(members: list[Member]) -> bool:
    sets = [m.partitions for m in members]
    share = PARTITIONS // len(members)
    return set().union(*sets) == set(range(PARTITIONS)) and \
        sum(map(len, sets)) == PARTITIONS and all(len(s) == share for s in sets)


def converge(c: RawClient, group: str, members: list[Member], rounds: int = 6) -> None:
    """Heartbeat round-robin until the members hold an even, disjoint cover and the group is
    Stable; fail with every member's request/response history otherwise."""
    for _ in range(rounds):
        for m in members:
            m.beat()
        if balanced(members) and describe(c, group).group_state == "Stable":
            return
    raise AssertionError(
        f"not balanced after {rounds} rounds: "
        f"{ {m.member_id: sorted(m.partitions) for m in members} }; "
        f"group {describe(c, group).group_state}; history: "
        f"{ {m.member_id: m.log for m in members} }")


def setup(broker: Any, name: str) -> tuple[RawClient, str, str]:
    topic, group = f"{name}-t", f"{name}-g"
    create_topic(broker, topic, PARTITIONS)
    return client(broker), group, topic


def test_resent_join_after_lost_response_keeps_one_assignment(broker: Any) -> None:
    """A's join is answered but lost; A sends epoch 0 again with the same member id. The
    coordinator keeps one member, answers with the same epoch and the full assignment, and when
    B and C join, A is told to revoke and they get its partitions."""
    c, group, topic = setup(broker, "resent-join")
    with c:
        a = Member(c, group, topic, "A")
        first = a.beat(lose=True)
        assert first.error_code == NONE and first.member_epoch == 1
        again = a.beat()
        assert (again.error_code, again.member_epoch, a.partitions) == (NONE, 1, set(range(6)))
        (m,) = describe(c, group).members
        assert m.member_id == "A" and m.member_epoch == 1
        b, cc = Member(c, group, topic, "B"), Member(c, group, topic, "C")
        b.beat()
        cc.beat()
        converge(c, group, [a, b, cc])


def test_resent_join_while_others_joined_in_between(broker: Any) -> None:
    """A's join is lost, B and C join before A's retry (epoch 0 again) arrives: the retry gives
    A its share at once (it owns nothing), and B and C get theirs on their next heartbeat."""
    c, group, topic = setup(broker, "resent-join-late")
    with c:
        a, b, cc = (Member(c, group, topic, n) for n in "ABC")
        a.beat(lose=True)
        b.beat()
        cc.beat()
        r = a.beat()
        assert r.error_code == NONE and len(a.partitions) == 2
        converge(c, group, [a, b, cc])


def test_lost_revocation_response_is_repeated(broker: Any) -> None:
    """librdkafka's sequence in the failed compat run: A owns all six; B joins; the response
    telling A to revoke is lost, and A (no full request after a timeout) keeps sending plain
    heartbeats with null owned partitions. The coordinator must tell it again, else A keeps all
    six and B and C stay empty until A's rebalance timeout."""
    c, group, topic = setup(broker, "lost-revoke")
    with c:
        a, b, cc = (Member(c, group, topic, n) for n in "ABC")
        a.beat()
        a.beat()  # acknowledges its six partitions
        assert a.partitions == set(range(6)) and not a.report
        b.beat()
        told = a.beat(lose=True)
        assert told.assignment is not None  # the coordinator did tell it: [3 partitions]
        r = a.beat()
        assert r.assignment is not None, a.log  # ... and tells it again
        cc.beat()
        converge(c, group, [a, b, cc])


def test_lost_revocation_with_target_change_in_between(broker: Any) -> None:
    """As above, with C joining after the lost response (the target moves again while A is
    still revoking) and A losing two responses in a row."""
    c, group, topic = setup(broker, "lost-revoke-2")
    with c:
        a, b, cc = (Member(c, group, topic, n) for n in "ABC")
        a.beat()
        a.beat()
        b.beat()
        a.beat(lose=True)
        cc.beat()
        a.beat(lose=True)
        converge(c, group, [a, b, cc])


def test_lost_grant_of_released_partitions_is_repeated(broker: Any) -> None:
    """B waits (UNRELEASED_PARTITIONS) for partitions A revokes; the response granting them is
    lost. B's next plain heartbeat must carry them again, or B never consumes them while the
    coordinator counts them as B's."""
    c, group, topic = setup(broker, "lost-grant")
    with c:
        a, b = Member(c, group, topic, "A"), Member(c, group, topic, "B")
        a.beat()
        a.beat()
        b.beat()
        assert b.partitions == set()
        a.beat()  # told to revoke three
        a.beat()  # acknowledges: the three are released
        granted = b.beat(lose=True)
        assert granted.assignment is not None and len(granted.assignment.topic_partitions[0].partitions) == 3
        r = b.beat()
        assert r.assignment is not None and len(b.partitions) == 3, b.log
        converge(c, group, [a, b])


def test_lost_epoch_bump_previous_epoch(broker: Any) -> None:
    """A acknowledges its revocation and moves to a new epoch; that response is lost. Kafka's
    rule: the previous epoch is accepted with owned partitions that are a subset of the current
    assignment (the answer is the new epoch), refused (FENCED_MEMBER_EPOCH) with null or other
    partitions; a fenced member rejoins with epoch 0 and the group still converges."""
    c, group, topic = setup(broker, "lost-bump")
    with c:
        a, b = Member(c, group, topic, "A"), Member(c, group, topic, "B")
        a.beat()
        a.beat()
        b.beat()
        a.beat()  # told to revoke: A owns three now and reports them next
        old_epoch = a.epoch
        bumped = a.beat(lose=True)
        assert bumped.member_epoch > old_epoch
        mine = set(a.owned)
        other = {(t, p) for t, _ in mine for p in range(PARTITIONS)} - mine
        r = a.send(a.request(owned=mine | {next(iter(other))}, report=True))
        assert r.error_code == FENCED_MEMBER_EPOCH
        r = a.send(a.request(report=False))
        assert r.error_code == FENCED_MEMBER_EPOCH
        r = a.beat(report=True)
        assert (r.error_code, r.member_epoch) == (NONE, bumped.member_epoch)
        converge(c, group, [a, b])
        # A zombie epoch is fenced; the member rejoins (epoch 0, same id) and converges again.
        r = a.beat(epoch=a.epoch - 1, report=False)
        assert r.error_code == FENCED_MEMBER_EPOCH and a.epoch == 0
        converge(c, group, [a, b])


def test_full_request_after_lost_response(broker: Any) -> None:
    """The Java client's recovery: after a failed heartbeat it sends every field, and the
    coordinator answers with the assignment (Kafka's full-request rule)."""
    c, group, topic = setup(broker, "full-after-error")
    with c:
        a = Member(c, group, topic, "A", full_after_error=True)
        b, cc = Member(c, group, topic, "B"), Member(c, group, topic, "C")
        a.beat()
        a.beat()
        b.beat()
        a.beat(lose=True)
        assert a.full
        r = a.beat()
        assert r.assignment is not None and len(a.partitions) == 3
        cc.beat()
        converge(c, group, [a, b, cc])
