"""One consumer group's state (KIP-848), as rebuilt by replaying its records.

Invariants: the group epoch only grows; ``assignment_epoch <= group_epoch``; a partition is
owned (assigned or pending revocation) by at most one member, and ``partition_epochs`` maps it to
that member's epoch; ``static_members`` maps an instance id to the member that currently holds
it. These objects never do I/O and never schedule timers; only ``replay`` mutates their durable
fields (everything but the timers and ``reported_owned``, which the manager keeps in memory).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from enum import Enum

from ..group import OffsetAndMetadata
from ..timer import TimerHandle
from .regex import InvalidRegularExpression, compile_topic_regex

# A member's partitions: topic id -> partition numbers (no empty sets).
Assignment = dict[uuid.UUID, set[int]]

# The cluster's topics as consumer groups see them: name -> (topic id, partition count, internal).
TopicsView = Mapping[str, tuple[uuid.UUID, int, bool]]

JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(Enum):
    """Kafka's ``MemberState`` with its record byte."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def of(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class ConsumerGroupState(Enum):
    """The group's state, derived from its epochs and members (Kafka's ``ConsumerGroupState``).

    * ``Empty``: no members. * ``Assigning``: the group epoch moved past the target
      assignment's epoch (a new target is due). * ``Reconciling``: some member has not yet
      reached the target assignment. * ``Stable``: every member is at the target.
    * ``Dead``: deleted.
    """

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int


def copy_assignment(a: Assignment) -> Assignment:
    return {t: set(ps) for t, ps in a.items() if ps}


def assignment_size(a: Assignment) -> int:
    return sum(len(ps) for ps in a.values())


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """A member that speaks the classic protocol (JoinGroup/SyncGroup) inside a consumer group
    (KIP-848 online migration): its session timeout and its JoinGroup protocols."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(eq=False)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic: ClassicMemberMetadata | None = None
    # ConsumerGroupCurrentMemberAssignment
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # In memory only, owned by the manager.
    session_timer: TimerHandle | None = None
    rebalance_timer: TimerHandle | None = None
    rebalance_timer_epoch: int = -1
    join_timer: TimerHandle | None = None  # a classic member told to rejoin (KIP-848 migration)
    # The partitions the member last reported owning (a heartbeat's TopicPartitions); None when
    # not known since the group was loaded. Not a record: it only decides whether a heartbeat
    # response repeats the assignment (see manager's theory of operation).
    reported_owned: Assignment | None = None

    def subscription_equals(self, other: ConsumerGroupMember) -> bool:
        return (self.instance_id, self.rack_id, self.client_id, self.client_host,
                sorted(self.subscribed_topic_names), self.subscribed_topic_regex,
                self.rebalance_timeout_ms, self.server_assignor, self.classic) == \
            (other.instance_id, other.rack_id, other.client_id, other.client_host,
             sorted(other.subscribed_topic_names), other.subscribed_topic_regex,
             other.rebalance_timeout_ms, other.server_assignor, other.classic)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)
    target_assignment: dict[str, Assignment] = field(default_factory=dict)
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    offsets: MutableMapping[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    dead: bool = False

    protocol_type = "consumer"

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if not m.is_reconciled_to(self.assignment_epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        if instance_id is None:
            return None
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def add_partition_epochs(self, a: Assignment, epoch: int) -> None:
        for t, ps in a.items():
            for p in ps:
                self.partition_epochs[(t, p)] = epoch

    def remove_partition_epochs(self, a: Assignment, epoch: int) -> None:
        for t, ps in a.items():
            for p in ps:
                if self.partition_epochs.get((t, p)) == epoch:
                    del self.partition_epochs[(t, p)]

    def subscribed_topic_names(self) -> set[str]:
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.subscribed_topic_names)
        return names


def member_topics(m: ConsumerGroupMember, view: TopicsView) -> set[str]:
    """The topics ``m`` subscribes to that exist: by name, and by regex (non-internal only)."""
    names = {n for n in m.subscribed_topic_names if n in view}
    if m.subscribed_topic_regex:
        try:
            rx = compile_topic_regex(m.subscribed_topic_regex)
        except InvalidRegularExpression:
            return names
        names.update(n for n, (_, _, internal) in view.items()
                     if not internal and rx.fullmatch(n))
    return names


def subscription_metadata(members: Iterable[ConsumerGroupMember],
                          view: TopicsView) -> dict[str, TopicMetadata]:
    """The metadata of every topic some member subscribes to (the PartitionMetadata record)."""
    names: set[str] = set()
    for m in members:
        names |= member_topics(m, view)
    return {n: TopicMetadata(view[n][0], n, view[n][1]) for n in sorted(names)}
