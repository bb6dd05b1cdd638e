"""Moving a member towards its target assignment: Kafka's ``CurrentAssignmentBuilder``.

Revoke before assign: a partition moves to a new owner only after the old owner has stopped
reporting it. A member whose target drops partitions stays at its epoch in
``UNREVOKED_PARTITIONS`` until its heartbeat's owned partitions no longer include them; then it
moves to the target epoch and gets the partitions it may take now. A partition still owned
by another member (its partition epoch is set) is withheld: the member is
``UNRELEASED_PARTITIONS`` and gets it on a later heartbeat once it is released.

Pure functions over :class:`~groupcoord.consumer.group.ConsumerGroupMember` values; the manager
turns the result into a CurrentMemberAssignment record.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from .group import Assignment, ConsumerGroupMember, MemberState, copy_assignment

Owned = list[tuple[uuid.UUID, list[int]]] | None


class FencedMemberEpoch(Exception):
    pass


@dataclass(slots=True)
class MemberAssignmentState:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Assignment
    pending_revocation: Assignment


def owns_any(owned: Owned, partitions: Assignment) -> bool:
    """Whether the owned partitions of a heartbeat include any of ``partitions``; a heartbeat
    that did not report its partitions (None) is taken to still own them."""
    if owned is None:
        return True
    for topic_id, ps in owned:
        pending = partitions.get(topic_id)
        if pending and any(p in pending for p in ps):
            return True
    return False


def owned_assignment(owned: list[tuple[uuid.UUID, list[int]]]) -> Assignment:
    """A heartbeat's owned partitions as an :data:`Assignment` (no empty sets)."""
    out: Assignment = {}
    for topic_id, ps in owned:
        if ps:
            out.setdefault(topic_id, set()).update(ps)
    return out


def is_subset(owned: Owned, target: Assignment) -> bool:
    if owned is None:
        return False
    for topic_id, ps in owned:
        have = target.get(topic_id)
        if have is None or any(p not in have for p in ps):
            return False
    return True


def current_state(member: ConsumerGroupMember) -> MemberAssignmentState:
    return MemberAssignmentState(member.member_epoch, member.previous_member_epoch, member.state,
                                 copy_assignment(member.assigned),
                                 copy_assignment(member.pending_revocation))


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
              partition_epoch: Callable[[uuid.UUID, int], int],
              owned: Owned) -> MemberAssignmentState:
    """Kafka's ``CurrentAssignmentBuilder.build``."""
    cur = current_state(member)
    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, cur.assigned, target_epoch, target,
                         partition_epoch, owned)
        return cur
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            return cur
        return _next(member, member.member_epoch + 1, cur.assigned, target_epoch, target,
                     partition_epoch, owned)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, cur.assigned, target_epoch, target,
                     partition_epoch, owned)
    # UNKNOWN: the member must start over from nothing.
    if owned is None or owned:
        raise FencedMemberEpoch("the member is in an unknown state")
    return _next(member, target_epoch, cur.assigned, target_epoch, target, partition_epoch, owned)


def _next(member: ConsumerGroupMember, member_epoch: int, assigned: Assignment, target_epoch: int,
          target: Assignment, partition_epoch: Callable[[uuid.UUID, int], int],
          owned: Owned) -> MemberAssignmentState:
    new_assigned: Assignment = {}
    revoke: Assignment = {}
    to_assign: Assignment = {}
    unreleased = False
    for t in set(target) | set(assigned):
        want = target.get(t, set())
        have = assigned.get(t, set())
        keep = have & want
        gone = have - keep
        add = want - keep
        blocked = {p for p in add if partition_epoch(t, p) != -1}
        if blocked:
            unreleased = True
            add -= blocked
        if keep:
            new_assigned[t] = keep
        if gone:
            revoke[t] = gone
        if add:
            to_assign[t] = add
    if revoke and owns_any(owned, revoke):
        return MemberAssignmentState(member_epoch, _prev(member, member_epoch),
                                     MemberState.UNREVOKED_PARTITIONS, new_assigned, revoke)
    for t, ps in to_assign.items():
        new_assigned.setdefault(t, set()).update(ps)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return MemberAssignmentState(target_epoch, _prev(member, target_epoch), state, new_assigned, {})


def _prev(member: ConsumerGroupMember, new_epoch: int) -> int:
    """Kafka's ``updateMemberEpoch``: the previous epoch becomes the epoch before this update."""
    return member.member_epoch
