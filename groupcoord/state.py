"""The classic group's state machine: five states, each with the states it may be entered from.

Named with Kafka's wire strings (DescribeGroups and ListGroups send ``state.value``). An illegal
transition is a coordinator bug, never a client error, so it raises :class:`IllegalStateTransition`.

* ``Empty``: no members, but the group may still hold committed offsets (also the state of
  groups that only commit offsets, "simple" consumers). Action: answer JoinGroup; accept
  OffsetCommit with generation -1. Transition: a join -> PreparingRebalance; all offsets
  expired or DeleteGroups -> Dead.
* ``PreparingRebalance``: waiting for every known member to (re)join, bounded by the rebalance
  timeout (and by ``group.initial.rebalance.delay.ms`` for a group that was Empty). Action:
  hold JoinGroup responses; heartbeats answer REBALANCE_IN_PROGRESS. Transition: all joined or
  timeout -> CompletingRebalance (or Empty if nobody joined).
* ``CompletingRebalance``: join responses sent; waiting for the leader's SyncGroup with the
  assignment. Action: hold followers' SyncGroup; commits answer REBALANCE_IN_PROGRESS.
  Transition: leader's assignment persisted -> Stable; a member joins/leaves/expires ->
  PreparingRebalance.
* ``Stable``: assignment in force. Transition: a join with new metadata, a leader rejoin, a
  leave or expiry -> PreparingRebalance.
* ``Dead``: the group is being removed; nothing is answered but COORDINATOR_NOT_AVAILABLE /
  GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from enum import Enum


class IllegalStateTransition(AssertionError):
    """A group was asked to enter a state it cannot be entered from: a coordinator bug."""


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @property
    def valid_previous_states(self) -> frozenset[GroupState]:
        return _VALID_PREVIOUS[self]

    @classmethod
    def parse(cls, name: str) -> GroupState | None:
        """Case-insensitive lookup by wire name (ListGroups v4 state filters), else None."""
        for s in cls:
            if s.value.lower() == name.lower():
                return s
        return None


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


def check_transition(current: GroupState, target: GroupState) -> None:
    if current not in target.valid_previous_states:
        raise IllegalStateTransition(f"group cannot go from {current.value} to {target.value}")
