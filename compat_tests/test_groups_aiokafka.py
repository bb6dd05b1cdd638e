"""Consumer groups with aiokafka against a live broker (issue #3, (a)-(e)).

Each consumer is a subprocess running ``AIOKafkaConsumer`` (see test_groups_support.py).
aiokafka ships the range, roundrobin and sticky assignors (no cooperative protocol).
"""

from __future__ import annotations

import pytest

from compat_tests.test_groups_support import (
    scenario_assignor,
    scenario_resume_after_broker_restart,
    scenario_static_member_restart,
    scenario_three_consumers_then_close_and_kill,
)

CLIENT = "aiokafka"


@pytest.mark.slow
def test_three_consumers_then_close_and_kill(broker) -> None:
    scenario_three_consumers_then_close_and_kill(broker.bootstrap, CLIENT)


@pytest.mark.slow
def test_resume_after_broker_restart(broker) -> None:
    scenario_resume_after_broker_restart(broker, CLIENT)


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky"])
def test_assignor(broker, assignor: str) -> None:
    scenario_assignor(broker.bootstrap, CLIENT, assignor)


def test_static_member_restart(broker) -> None:
    scenario_static_member_restart(broker.bootstrap, CLIENT)
