"""Consumer groups with kcat's balanced consumer (``kcat -G``, librdkafka) (issue #3).

kcat reports its assignments as ``% Group ... rebalanced ...: assigned: t [0], ...`` notices
and commits automatically (every 100 ms here, and on close); a killed kcat's duplicates are
therefore only messages it had itself read. kcat has no group listing or description
commands; the kafka-python and confluent-kafka admin tests cover those. Under the cooperative
protocol kcat prints deltas (``incremental assignment`` / ``incremental revoke``); the translator
tests below pin how they are folded into the member's assignment.
"""

from __future__ import annotations

import shutil

import pytest

from compat_tests.test_groups_support import (
    Group,
    create_topic,
    kcat_translator,
    produce,
    scenario_assignor,
    scenario_static_member_restart,
    scenario_three_consumers_then_close_and_kill,
    unique,
    wait_balanced,
    wait_consumed,
)

needs_kcat = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not on PATH")
CLIENT = "kcat"

# Notices captured from kcat (librdkafka 2.x) in one cooperative-sticky group of three members
# on a 6-partition topic, then one eager (range) member: what the translator must follow.
_COOP = "(memberid rdkafka-30d9, COOPERATIVE rebalance protocol)"
COOPERATIVE_NOTICES = [
    "% Waiting for group rebalance",
    f"% Group g1 rebalanced: incremental assignment of 6 partition(s) {_COOP}: "
    "t6 [0], t6 [1], t6 [2], t6 [3], t6 [4], t6 [5]",
    "% Reached end of topic t6 [5] at offset 0",
    f"% Group g1 rebalanced: incremental revoke of 3 partition(s) {_COOP}: t6 [0], t6 [1], t6 [2]",
    f"% Group g1 rebalanced: incremental assignment of 0 partition(s) {_COOP}: ",
    "MSG 3 0 v-3",
    f"% Group g1 rebalanced: incremental revoke of 1 partition(s) {_COOP}: t6 [3]",
    f"% Group g1 rebalanced: incremental assignment of 1 partition(s) {_COOP}: t6 [0]",
]
EAGER_NOTICES = [
    "% Group g2 rebalanced (memberid rdkafka-d806): assigned: t6 [0], t6 [1], t6 [2], t6 [3], t6 [4], t6 [5]",
    "% Group g2 rebalanced (memberid rdkafka-d806): revoked: t6 [0], t6 [1], t6 [2], t6 [3], t6 [4], t6 [5]",
    "% Group g2 rebalanced (memberid rdkafka-d806): assigned: t6 [3], t6 [4], t6 [5]",
]


def test_translator_follows_incremental_deltas() -> None:
    """An incremental revoke removes partitions (assigned minus revoked); it is not the new assignment."""
    translate = kcat_translator()
    out = [translate(line) for line in COOPERATIVE_NOTICES]
    assert [x for x in out if x is not None] == [
        "ASSIGN t6:0,t6:1,t6:2,t6:3,t6:4,t6:5",
        "ASSIGN t6:3,t6:4,t6:5",
        "ASSIGN t6:3,t6:4,t6:5",
        "MSG 3 0 v-3",
        "ASSIGN t6:4,t6:5",
        "ASSIGN t6:0,t6:4,t6:5",
    ]


def test_translator_eager_replaces_and_clears() -> None:
    translate = kcat_translator()
    assert [translate(line) for line in EAGER_NOTICES] == [
        "ASSIGN t6:0,t6:1,t6:2,t6:3,t6:4,t6:5", "ASSIGN ", "ASSIGN t6:3,t6:4,t6:5"]
    assert translate("% Group g2 rebalanced: something new: t6 [1]") is None


@needs_kcat
@pytest.mark.slow
def test_three_consumers_then_close_and_kill(broker) -> None:
    scenario_three_consumers_then_close_and_kill(broker.bootstrap, CLIENT)


@needs_kcat
@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_assignor(broker, assignor: str) -> None:
    scenario_assignor(broker.bootstrap, CLIENT, assignor)


@needs_kcat
def test_static_member_restart(broker) -> None:
    scenario_static_member_restart(broker.bootstrap, CLIENT)


@needs_kcat
@pytest.mark.slow
def test_resume_after_broker_restart(broker) -> None:
    topic, group = unique("grp-kr"), unique("grp")
    create_topic(broker.bootstrap, topic)
    first = produce(broker.bootstrap, topic, "before", 3)
    with Group(broker.bootstrap, topic, group) as g:
        w = g.start(CLIENT)
        wait_balanced([w])
        wait_consumed([w], first)
        w.close()  # commits its final offsets and leaves
        broker.restart()
        second = produce(broker.bootstrap, topic, "after", 3)
        w2 = Group(broker.bootstrap, topic, group).start(CLIENT, name="kcat-after-restart")
        g.workers.append(w2)
        wait_consumed([w2], second)
        assert {v for _, _, v in w2.messages()}.isdisjoint(first)
