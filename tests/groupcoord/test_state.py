"""The group state enum: every allowed transition works, every other one raises."""

from __future__ import annotations

import itertools

import pytest

from groupcoord.group import GroupMetadata
from groupcoord.state import GroupState, IllegalStateTransition, check_transition

ALLOWED = {
    (GroupState.EMPTY, GroupState.PREPARING_REBALANCE),
    (GroupState.STABLE, GroupState.PREPARING_REBALANCE),
    (GroupState.COMPLETING_REBALANCE, GroupState.PREPARING_REBALANCE),
    (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE),
    (GroupState.PREPARING_REBALANCE, GroupState.EMPTY),
    (GroupState.COMPLETING_REBALANCE, GroupState.STABLE),
} | {(s, GroupState.DEAD) for s in GroupState}


@pytest.mark.parametrize("src, dst", list(itertools.product(GroupState, GroupState)))
def test_transition_table(src: GroupState, dst: GroupState) -> None:
    group = GroupMetadata("g", state=src)
    if (src, dst) in ALLOWED:
        group.transition_to(dst, 123)
        assert group.state is dst and group.current_state_timestamp == 123
    else:
        with pytest.raises(IllegalStateTransition):
            group.transition_to(dst, 123)
        assert group.state is src


def test_wire_names_and_parse() -> None:
    assert [s.value for s in GroupState] == [
        "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]
    assert GroupState.parse("stable") is GroupState.STABLE
    assert GroupState.parse("nope") is None
    with pytest.raises(IllegalStateTransition):
        check_transition(GroupState.EMPTY, GroupState.STABLE)
