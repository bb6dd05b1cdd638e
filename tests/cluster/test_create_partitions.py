"""CreatePartitions (key 37) with explicit replica assignments on the 3-broker cluster (issue 30).

librdkafka's 0081_admin grows topics with assignments such as ``[[2, 1, 0]]``; Samsa refused
them on a cluster ("only broker 0 exists") because it validated against the local broker.
Through confluent-kafka's AdminClient (and kafka-python's admin for
a wrong number of assignments, which librdkafka refuses itself): the new partitions exist with the requested replicas and
the first replica leads, they take records, and bad assignments get Kafka's
INVALID_REPLICA_ASSIGNMENT with its ReplicationControlManager messages and change nothing.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import NewPartitions
from kafka.admin import KafkaAdminClient

from tests.support.cluster import SamsaCluster, cluster_mode_implemented
from tests.support.replicas import admin, create_topic, partitions, wait_for, wait_full_isr

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not cluster_mode_implemented(), reason="cluster mode (broker/controller) has not landed yet"),
]

INVALID_REPLICA_ASSIGNMENT = 39


def _grow(cluster: SamsaCluster, topic: str, total: int, assignment: list[list[int]] | None,
          validate_only: bool = False) -> None:
    a = admin(cluster)
    new = NewPartitions(topic, total) if assignment is None else \
        NewPartitions(topic, total, replica_assignment=assignment)
    fs = a.create_partitions([new],
                             validate_only=validate_only, request_timeout=30)
    fs[topic].result(30)


def test_explicit_assignments_are_applied_and_bad_ones_refused(cluster3: SamsaCluster) -> None:
    topic = f"cp-{uuid.uuid4().hex[:8]}"
    create_topic(cluster3, topic, 1, 3)
    wait_full_isr(cluster3, topic, 3)

    # validate_only checks a good assignment and creates nothing
    _grow(cluster3, topic, 2, [[2, 1, 0]], validate_only=True)
    assert len(partitions(cluster3, topic)) == 1

    _grow(cluster3, topic, 3, [[2, 1, 0], [1, 0, 2]])
    ps = wait_full_isr(cluster3, topic, 3)
    assert sorted(ps) == [0, 1, 2]
    assert (list(ps[1].replicas), ps[1].leader) == ([2, 1, 0], 2)
    assert (list(ps[2].replicas), ps[2].leader) == ([1, 0, 2], 1)

    # the new partitions take records (acks=all: every replica of the assignment has them)
    p = Producer({"bootstrap.servers": cluster3.bootstrap, "acks": "all"})
    delivered: list[tuple[int, int]] = []
    for part in (1, 2):
        p.produce(topic, b"v", partition=part,
                  on_delivery=lambda err, m: delivered.append((m.partition(), m.offset())) if err is None else None)
    assert p.flush(30) == 0
    assert sorted(delivered) == [(1, 0), (2, 0)]

    bad = [
        (4, [[2, 1, 7]], "The manual partition assignment includes broker 7, but no such broker is registered."),
        (4, [[1, 1, 0]], "The manual partition assignment includes the broker 1 more than once."),
        (4, [[1, 0]], "The manual partition assignment includes a partition with 2 replica(s), but this is not "
                      "consistent with previous partitions, which have 3 replica(s)."),
    ]
    for total, assignment, message in bad:
        with pytest.raises(KafkaException) as err:
            _grow(cluster3, topic, total, assignment)
        e = err.value.args[0]
        assert (e.code(), e.str()) == (INVALID_REPLICA_ASSIGNMENT, message), assignment
    # librdkafka refuses a wrong number of assignments itself; kafka-python's admin sends it
    kp = KafkaAdminClient(bootstrap_servers=cluster3.bootstrap, request_timeout_ms=30000)
    try:
        r = kp.create_partitions({topic: {"count": 5, "assignments": [[0, 1, 2]]}}, timeout_ms=30000,
                                 raise_errors=False)
    finally:
        kp.close()
    assert [(t.name, t.error_code, t.error_message) for t in r.results] == [
        (topic, INVALID_REPLICA_ASSIGNMENT,
         "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.")]
    # nothing changed on any broker
    for i in range(3):
        md = cluster3.metadata(i, [topic])
        assert [len(t.partitions) for t in md.topics] == [3]

    # without an assignment the cluster still places replicas itself
    _grow(cluster3, topic, 4, None)
    wait_for(lambda: len(partitions(cluster3, topic)) == 4, 60, "partition 3 in the metadata")
    assert len(wait_full_isr(cluster3, topic, 3)[3].replicas) == 3
