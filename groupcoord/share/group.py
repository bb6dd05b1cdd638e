"""A share group (KIP-932) as the coordinator holds it.

Unlike a consumer group, a share group never revokes: every member subscribed to a topic may
consume from every one of its partitions (records, not partitions, are handed out one member at
a time by the share partitions, :mod:`broker.share`). So the target assignment *is* the
assignment, and a member's epoch jumps straight to the group's epoch. Invariant:
``assignment_epoch <= group_epoch``; a member's ``member_epoch`` is an epoch the group had.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import Enum

from ..timer import TimerHandle

Assignment = dict[uuid.UUID, set[int]]


class ShareGroupState(Enum):
    """Kafka's ``ShareGroup.ShareGroupState`` wire strings."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    assignment: Assignment = field(default_factory=dict)
    session_timer: TimerHandle | None = None


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    target_assignment: dict[str, Assignment] = field(default_factory=dict)  # member id -> target
    # The subscribed topics' (name, id, partitions) the assignment was computed over: a change
    # (a topic created, partitions added) bumps the group epoch, as Kafka's metadata hash does.
    subscription_metadata: tuple[tuple[str, uuid.UUID, int], ...] = ()
    protocol_type: str = "share"

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topics(self) -> set[str]:
        out: set[str] = set()
        for m in self.members.values():
            out.update(m.subscribed_topic_names)
        return out
