"""Consumer groups with kcat's balanced consumer (``kcat -G``, librdkafka) (issue #3).

kcat reports its assignments as ``% Group ... rebalanced ...: assigned: t [0], ...`` notices
and commits automatically (every 100 ms here, and on close); a killed kcat's duplicates are
therefore only messages it had itself read. kcat has no group listing or description
commands; the kafka-python and confluent-kafka admin tests cover those.
"""

from __future__ import annotations

import shutil

import pytest

from compat_tests.test_groups_support import (
    Group,
    create_topic,
    produce,
    scenario_assignor,
    scenario_static_member_restart,
    scenario_three_consumers_then_close_and_kill,
    unique,
    wait_balanced,
    wait_consumed,
)

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not on PATH")
CLIENT = "kcat"


@pytest.mark.slow
def test_three_consumers_then_close_and_kill(broker) -> None:
    scenario_three_consumers_then_close_and_kill(broker.bootstrap, CLIENT)


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_assignor(broker, assignor: str) -> None:
    scenario_assignor(broker.bootstrap, CLIENT, assignor)


def test_static_member_restart(broker) -> None:
    scenario_static_member_restart(broker.bootstrap, CLIENT)


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
