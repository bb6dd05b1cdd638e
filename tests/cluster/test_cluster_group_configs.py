"""Dynamic group configs in a cluster: stored in ZooKeeper at ``/config/groups/<group>`` with a
``/config/changes`` notification, so a config altered through one broker is described by every
broker and applied by whichever broker leads the share-partitions: a ShareConsumer of a group
given ``share.auto.offset.reset=earliest`` reads records produced before it joined (the
cluster's default is latest)."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from tests.cluster.test_cluster_share_groups import drain, produce
from tests.support.cluster import SamsaCluster
from tests.support.rawclient import RawClient
from tests.support.replicas import create_topic, wait_for, wait_full_isr


def described(broker: Any, group: str) -> dict[str, tuple[str, int]]:
    client = RawClient(broker.host, broker.port)
    try:
        r = client.roundtrip(DescribeConfigsRequest[4](resources=[(32, group, None)], include_synonyms=False,
                                                       include_documentation=False), 4, DescribeConfigsResponse)
    finally:
        client.close()
    assert r.results[0].error_code == 0, r
    return {c.name: (c.value, c.config_source) for c in r.results[0].configs}


def test_group_configs_live_in_zookeeper(cluster_factory: Any) -> None:
    cluster: SamsaCluster = cluster_factory(2, overrides={
        "offsets.topic.replication.factor": 2, "offsets.topic.num.partitions": 3,
        "share.coordinator.state.topic.replication.factor": 2, "share.coordinator.state.topic.num.partitions": 3})
    cluster.wait_for_brokers(2)
    topic, group = f"gc-{uuid.uuid4().hex[:6]}", f"sg/{uuid.uuid4().hex[:6]}"  # "/": one znode still
    create_topic(cluster, topic, 3, 2)
    wait_full_isr(cluster, topic, 2)
    before = [f"b{i}".encode() for i in range(12)]
    produce(cluster.bootstrap, topic, before)
    admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap})
    r = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([r])[r].result(30)
    for i in range(2):  # every broker, whichever one stored it
        wait_for(lambda i=i: described(cluster[i], group)["share.auto.offset.reset"] == ("earliest", 8),
                 30, f"broker {i} to see the group config")
    c = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    c.subscribe([topic])
    try:
        assert sorted(drain(c, 12, 90)) == sorted(before)
    finally:
        c.close()
