"""Injected faults (broker/hooks.py through broker.testing.SamsaBroker) seen by librdkafka."""

from __future__ import annotations

import time

import pytest

from broker.testing import SamsaBroker

ck = pytest.importorskip("confluent_kafka")


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


def _produce(kafka, topic, value, **conf):
    p = ck.Producer({"bootstrap.servers": kafka.bootstrap_servers, "enable.idempotence": True,
                     "linger.ms": 0, "retry.backoff.ms": 10, **conf})
    reports = []
    p.produce(topic, value, on_delivery=lambda err, msg: reports.append((err, msg.offset() if msg else None)))
    assert p.flush(60) == 0
    return reports


def test_not_leader_three_times_idempotent_producer_lands_once(kafka, topic):
    rule = kafka.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=3, topic=topic)
    assert _produce(kafka, topic, b"order-1") == [(None, 0)]
    assert rule.fired == 3
    assert len(kafka.requests(api="Produce", topic=topic)) >= 4
    assert [r.value for r in kafka.records(topic)] == [b"order-1"]


def test_dropped_response_times_out_and_retries_idempotently(kafka, topic):
    rule = kafka.drop_response(api="Produce", times=1, topic=topic)  # appended, answer lost
    assert _produce(kafka, topic, b"once", **{"request.timeout.ms": 1500, "socket.timeout.ms": 1500}) == [(None, 0)]
    assert rule.fired == 1
    assert len(kafka.requests(api="Produce", topic=topic)) >= 2
    assert [r.value for r in kafka.records(topic)] == [b"once"]


def test_closed_connection_reconnects_and_delivers(kafka, topic):
    rule = kafka.close_connection(api="Produce", times=1, topic=topic, process=True)
    assert _produce(kafka, topic, b"after-close", **{"reconnect.backoff.ms": 10}) == [(None, 0)]
    assert rule.fired == 1
    assert [r.value for r in kafka.records(topic)] == [b"after-close"]


def test_latency_on_produce(kafka, topic):
    rule = kafka.delay(api="Produce", ms=400, times=1, topic=topic)
    t0 = time.monotonic()
    assert _produce(kafka, topic, b"slow") == [(None, 0)]
    assert time.monotonic() - t0 >= 0.4  # the broker held the answer at least that long
    assert rule.fired == 1


def test_error_reaches_the_application_when_retries_are_off(kafka, topic):
    kafka.inject(api="Produce", error="INVALID_RECORD", times=1, topic=topic)  # not retriable
    p = ck.Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 0})
    errors = []
    p.produce(topic, b"bad", on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert len(errors) == 1 and errors[0] is not None and errors[0].code() == ck.KafkaError.INVALID_RECORD
    assert kafka.records(topic) == []
