"""Injected faults (broker/hooks.py through broker.testing.SamsaBroker) seen by aiokafka."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker.testing import SamsaBroker

aiokafka = pytest.importorskip("aiokafka")


@pytest.fixture(scope="module")
def kafka():
    with SamsaBroker() as k:
        yield k


@pytest.fixture
def topic(kafka):
    name = kafka.create_topic()
    yield name
    kafka.clear_faults()
    kafka.delete_topic(name)


def _produce(kafka, topic, value, **config):
    async def run():
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers, enable_idempotence=True,
                                      retry_backoff_ms=10, **config)
        await p.start()
        try:
            return (await p.send_and_wait(topic, value)).offset
        finally:
            await p.stop()

    return asyncio.run(run())


def test_not_leader_three_times_idempotent_producer_lands_once(kafka, topic):
    rule = kafka.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=3, topic=topic)
    assert _produce(kafka, topic, b"order-1") == 0
    assert rule.fired == 3
    assert len(kafka.requests(api="Produce", topic=topic)) == 4
    assert [r.value for r in kafka.records(topic)] == [b"order-1"]


def test_dropped_response_times_out_and_retries_idempotently(kafka, topic):
    rule = kafka.drop_response(api="Produce", times=1, topic=topic)
    assert _produce(kafka, topic, b"once", request_timeout_ms=1500) == 0
    assert rule.fired == 1
    assert len(kafka.requests(api="Produce", topic=topic)) >= 2
    assert [r.value for r in kafka.records(topic)] == [b"once"]


def test_closed_connection_reconnects_and_delivers(kafka, topic):
    rule = kafka.close_connection(api="Produce", times=1, topic=topic)
    assert _produce(kafka, topic, b"after-close") == 0
    assert rule.fired == 1
    assert [r.value for r in kafka.records(topic)] == [b"after-close"]


def test_latency_on_fetch(kafka, topic):
    _produce(kafka, topic, b"slow")
    rule = kafka.delay(api="Fetch", ms=400, times=1, topic=topic)

    async def consume():
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, auto_offset_reset="earliest")
        await c.start()
        try:
            tp = aiokafka.TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            t0 = time.monotonic()
            msg = await asyncio.wait_for(c.getone(), 30)
            return msg.value, time.monotonic() - t0
        finally:
            await c.stop()

    value, waited = asyncio.run(consume())
    assert value == b"slow"
    assert waited >= 0.4
    assert rule.fired == 1


def test_join_group_error_then_group_forms(kafka, topic):
    group = f"g-{topic}"
    rule = kafka.inject(api="JoinGroup", error="COORDINATOR_LOAD_IN_PROGRESS", times=2)

    async def consume():
        c = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=kafka.bootstrap_servers, group_id=group,
                                      auto_offset_reset="earliest", retry_backoff_ms=10)
        await c.start()
        try:
            while not c.assignment():
                await asyncio.sleep(0.05)
            return c.assignment()
        finally:
            await c.stop()

    assert asyncio.run(asyncio.wait_for(consume(), 60)) == {aiokafka.TopicPartition(topic, 0)}
    assert rule.fired == 2
