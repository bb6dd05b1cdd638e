"""Consumer groups with confluent-kafka (librdkafka) against a live broker (issue #3, (a)-(e)).

Each consumer is a subprocess running ``confluent_kafka.Consumer`` (see test_groups_support.py).
librdkafka's assignors are range, roundrobin and cooperative-sticky (KIP-429: incremental
rebalancing driven by the client; the coordinator only runs generations). Also the Admin
API's group listing/description and offset listing.
"""

from __future__ import annotations

import pytest

from compat_tests.test_groups_support import (
    Group,
    create_topic,
    produce,
    scenario_assignor,
    scenario_cooperative_join,
    scenario_resume_after_broker_restart,
    scenario_static_member_restart,
    scenario_three_consumers_then_close_and_kill,
    unique,
    wait_balanced,
    wait_consumed,
)

CLIENT = "confluent-kafka"


@pytest.mark.slow
def test_three_consumers_then_close_and_kill(broker) -> None:
    scenario_three_consumers_then_close_and_kill(broker.bootstrap, CLIENT)


@pytest.mark.slow
def test_resume_after_broker_restart(broker) -> None:
    scenario_resume_after_broker_restart(broker, CLIENT)


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_assignor(broker, assignor: str) -> None:
    scenario_assignor(broker.bootstrap, CLIENT, assignor)


def test_cooperative_incremental_join(broker) -> None:
    scenario_cooperative_join(broker.bootstrap, CLIENT)


def test_static_member_restart(broker) -> None:
    scenario_static_member_restart(broker.bootstrap, CLIENT)


def test_admin_groups(broker) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    bootstrap = broker.bootstrap
    topic, group = unique("grp-adm"), unique("adm")
    create_topic(bootstrap, topic)
    values = produce(bootstrap, topic, "x", 2)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    with Group(bootstrap, topic, group) as g:
        w = g.start(CLIENT)
        wait_balanced([w])
        wait_consumed([w], values)
        w.wait_for(lambda x: len(x.committed()) == len(values), what="commits")
        listed = admin.list_consumer_groups().result(30)
        assert group in {x.group_id for x in listed.valid}
        desc = admin.describe_consumer_groups([group])[group].result(30)
        assert str(desc.state).endswith("STABLE") and desc.partition_assignor == "range"
        (member,) = desc.members
        assert member.client_id == w.name
        assert sorted(tp.partition for tp in member.assignment.topic_partitions) == list(range(6))
        w.close()
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert {tp.partition: tp.offset for tp in res.topic_partitions if tp.topic == topic} == {p: 2 for p in range(6)}
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0, 1)])])[group].result(30)
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0)])])[group].result(30)
    assert res.topic_partitions[0].offset == 1
    admin.delete_consumer_groups([group])[group].result(30)
    assert group not in {x.group_id for x in admin.list_consumer_groups().result(30).valid}
