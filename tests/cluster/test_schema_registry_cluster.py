"""The Schema Registry on a 3-broker cluster (real ZooKeeper): one primary elected through the
``schema-registry`` consumer group takes the writes, the others forward them and serve reads
from their own replay of ``_schemas``; with the primary's broker SIGKILLed, another registry is
elected and ids stay unique, and confluent-kafka's Avro serializer and deserializer work through
the survivors; the killed broker's registry catches up when it comes back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.net import free_port, wait_until
from tests.support.schema_registry import RegistryHttp


def _schema(n: int) -> str:
    return json.dumps({"type": "record", "name": f"R{n}", "fields": [{"name": "f", "type": "int"}]})


def _agree(regs: list[RegistryHttp], subject: str, expected: dict[str, Any]) -> bool:
    for r in regs:
        try:
            status, doc = r.get(f"/subjects/{subject}/versions/latest")
        except OSError:
            return False
        if status != 200 or {k: doc.get(k) for k in expected} != expected:
            return False
    return True


def test_primary_election_forwarding_and_failover(cluster_factory: Callable[..., Any]) -> None:
    ports = [free_port() for _ in range(3)]
    cluster = cluster_factory(3, broker_overrides={
        i: {"schema.registry.listeners": f"http://127.0.0.1:{p}", "num.partitions": 1} for i, p in enumerate(ports)})
    regs = [RegistryHttp(p) for p in ports]
    for r in regs:
        r.wait_ready(90)
    # the documented rule: the eligible member with the smallest URL is primary
    primary = min(range(3), key=lambda i: regs[i].url)
    others = [i for i in range(3) if i != primary]

    # a write to a node that is not primary is forwarded; every node then serves it
    client = SchemaRegistryClient({"url": regs[others[0]].url})
    first = client.register_schema("cl-a-value", Schema(_schema(1), "AVRO"))
    assert wait_until(lambda: _agree(regs, "cl-a-value", {"id": first, "version": 1}), 30)
    status, doc = regs[others[1]].post("/subjects/cl-b-value/versions", {"schema": _schema(2)})
    assert status == 200
    second = doc["id"]
    assert second != first
    assert wait_until(lambda: _agree(regs, "cl-b-value", {"id": second, "version": 1}), 30)
    # errors come back through the forward unchanged
    status, doc = regs[others[0]].post("/subjects/cl-a-value/versions", {"schema": "{bad"})
    assert (status, doc["error_code"]) == (422, 42201)

    # the primary's broker dies: a survivor is elected and writes go on, with fresh ids
    cluster.kill(primary)
    survivors = [regs[i] for i in others]
    results: list[tuple[int, Any]] = []

    def registered() -> bool:
        try:
            status, doc = survivors[0].post("/subjects/cl-c-value/versions", {"schema": _schema(3)})
        except OSError:
            return False
        results.append((status, doc))
        return status == 200

    assert wait_until(registered, 90, interval=1.0), results[-3:]
    third = results[-1][1]["id"]
    assert third not in (first, second)
    assert wait_until(lambda: _agree(survivors, "cl-c-value", {"id": third, "version": 1}), 30)
    status, doc = survivors[1].post("/subjects/cl-d-value/versions", {"schema": _schema(4)})
    assert status == 200 and doc["id"] not in (first, second, third)

    # confluent-kafka's serializer through a survivor that is not necessarily primary, a consumer
    # deserializing through the other survivor
    alive = ",".join(cluster[i].bootstrap for i in others)
    ser = AvroSerializer(SchemaRegistryClient({"url": survivors[0].url}), _schema(5))
    ctx = SerializationContext("cl-orders", MessageField.VALUE)
    p = Producer({"bootstrap.servers": alive, "acks": "all"})
    p.produce("cl-orders", value=ser({"f": 42}, ctx))
    assert p.flush(60) == 0
    de = AvroDeserializer(SchemaRegistryClient({"url": survivors[1].url}))
    c = Consumer({"bootstrap.servers": alive, "group.id": "cl-orders-reader", "auto.offset.reset": "earliest"})
    c.subscribe(["cl-orders"])
    got = []
    try:
        for _ in range(300):
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(de(m.value(), ctx))
                break
    finally:
        c.close()
    assert got == [{"f": 42}]

    # the old primary comes back and replays everything written meanwhile
    cluster.restart(primary)
    regs[primary].wait_ready(90)
    assert wait_until(lambda: _agree([regs[primary]], "cl-c-value", {"id": third, "version": 1}), 60)
    assert sorted(regs[primary].get("/subjects")[1]) == ["cl-a-value", "cl-b-value", "cl-c-value", "cl-d-value", "cl-orders-value"]


def _produce(bootstrap: str, topic: str, value: bytes) -> Any:
    errors: list[Any] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0})
    p.produce(topic, value=value, on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(60) == 0
    return errors[0]


def test_validation_on_a_broker_that_does_not_serve_the_registry(cluster_factory: Callable[..., Any]) -> None:
    """Only broker 0 serves the registry; the topic's leader is broker 2, which checks schema ids
    against its own read-only view of _schemas (Redpanda's way), including an id registered just
    before the produce."""
    port = free_port()
    cluster = cluster_factory(3, broker_overrides={0: {"schema.registry.listeners": f"http://127.0.0.1:{port}"}})
    reg = RegistryHttp(port)
    reg.wait_ready(90)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = NewTopic("validated", num_partitions=1, replica_assignment=[[2, 1]],
                     config={"confluent.value.schema.validation": "true"})
    for f in admin.create_topics([topic]).values():
        f.result(60)
    leader2 = cluster[2].bootstrap

    # not even a schema yet (no _schemas topic on a fresh cluster before the first registration)
    err = _produce(leader2, "validated", b"\x00\x00\x00\x00\x01not registered")
    assert err is not None and err.code() == KafkaError.INVALID_RECORD, err
    client = SchemaRegistryClient({"url": reg.url})
    registered = client.register_schema("validated-value", Schema(_schema(7), "AVRO"))
    other = client.register_schema("elsewhere-value", Schema(_schema(8), "AVRO"))
    # registered a moment ago through broker 0's registry: broker 2 reads _schemas to its end
    ser = AvroSerializer(client, _schema(7), conf={"auto.register.schemas": False, "use.latest.version": True})
    good = ser({"f": 1}, SerializationContext("validated", MessageField.VALUE))
    assert good[1:5] == registered.to_bytes(4, "big")
    assert _produce(leader2, "validated", good) is None
    for bad in (b"\x00" + (registered + other + 100).to_bytes(4, "big") + b"x",  # an id nobody registered
                b"\x00" + other.to_bytes(4, "big") + b"x",  # registered under another subject
                b"no magic byte"):
        err = _produce(leader2, "validated", bad)
        assert err is not None and err.code() == KafkaError.INVALID_RECORD, (bad, err)
    # the leader's log holds the one good record
    c = Consumer({"bootstrap.servers": leader2, "group.id": "validated-reader", "auto.offset.reset": "earliest"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition("validated", 0), timeout=30)
    finally:
        c.close()
    assert (low, high) == (0, 1)
