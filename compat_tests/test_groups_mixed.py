"""(f) One consumer group made of different clients (issue #3).

kafka-python, confluent-kafka (librdkafka) and aiokafka all speak the ``consumer`` protocol
type with the ``range`` assignor, so they can share a group: the coordinator picks the common
protocol, whichever member leads computes the assignment, and every member gets its share.
Then the same close/SIGKILL takeover as the single-client tests.
"""

from __future__ import annotations

import pytest

from compat_tests.test_groups_support import scenario_three_consumers_then_close_and_kill


@pytest.mark.slow
def test_kafka_python_confluent_aiokafka_share_partitions(broker) -> None:
    scenario_three_consumers_then_close_and_kill(
        broker.bootstrap, ["kafka-python", "confluent-kafka", "aiokafka"])


@pytest.mark.slow
def test_confluent_kafka_python_kafka_python(broker) -> None:
    scenario_three_consumers_then_close_and_kill(
        broker.bootstrap, ["confluent-kafka", "kafka-python", "kafka-python"])
