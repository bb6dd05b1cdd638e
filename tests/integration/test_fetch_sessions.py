"""Incremental fetch sessions (KIP-227) over the wire: session ids, epochs, trimmed answers,
forgotten partitions, the session errors, and the bounded cache.

Exact Fetch frames (kafka-python's message classes as the client-side codec) against a live
broker subprocess; the stock clients that use sessions by default run in compat_tests.
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from tests.support.rawclient import RawClient, build_batch

pytestmark = pytest.mark.timeout(120)

FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, UNKNOWN_LEADER_EPOCH = 70, 71, 75
TOPIC = "sessions"


def _fetch(c: RawClient, version: int, session_id: int, epoch: int, parts: dict[int, int], *,
           topic: Any = TOPIC, forgotten: list[int] | None = None, max_wait_ms: int = 50,
           leader_epoch: int = -1) -> Any:
    T = FetchRequest.FetchTopic
    P = T.FetchPartition
    F = FetchRequest.ForgottenTopic
    by_id = version >= 13
    topics = [T(**({"topic_id": topic} if by_id else {"topic": topic}), partitions=[
        P(partition=p, current_leader_epoch=leader_epoch, fetch_offset=off, last_fetched_epoch=-1, log_start_offset=-1,
          partition_max_bytes=1 << 20) for p, off in parts.items()])] if parts else []
    forgotten_topics = [F(**({"topic_id": topic} if by_id else {"topic": topic}), partitions=forgotten)] \
        if forgotten else []
    req = FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 22, isolation_level=0,
                       session_id=session_id, session_epoch=epoch, topics=topics,
                       forgotten_topics_data=forgotten_topics, rack_id="")
    return c.roundtrip(req, version, FetchResponse)


def _answered(resp: Any) -> dict[int, tuple[int, int, int]]:
    """partition -> (error, high watermark, records bytes) of what the response carries."""
    return {p.partition_index: (p.error_code, p.high_watermark, len(p.records or b""))
            for t in resp.responses for p in t.partitions}


def _create_topic(c: RawClient) -> None:
    T = MetadataRequest.MetadataRequestTopic
    md = c.roundtrip(MetadataRequest(topics=[T(name=TOPIC, topic_id=None)], allow_auto_topic_creation=True),
                     12, MetadataResponse)
    assert md.topics[0].error_code == 0 and len(md.topics[0].partitions) == 3


def _produce(c: RawClient, partition: int, n: int) -> None:
    code, _ = c.produce(TOPIC, partition, build_batch([(None, b"v%d" % i, []) for i in range(n)]))
    assert code == 0


@pytest.fixture
def client(broker_factory: Any) -> Any:
    b = broker_factory({"num.partitions": 3})
    with RawClient(b.host, b.port) as c:
        _create_topic(c)
        _produce(c, 0, 2)
        c.broker = b  # type: ignore[attr-defined]
        yield c


@pytest.mark.parametrize("version", [7, 12])
def test_session_lifecycle(client: RawClient, version: int) -> None:
    c = client
    full = _fetch(c, version, 0, 0, {0: 0, 1: 0, 2: 0})
    sid = full.session_id
    assert full.error_code == 0 and sid > 0
    assert _answered(full) == {0: (0, 2, _answered(full)[0][2]), 1: (0, 0, 0), 2: (0, 0, 0)}
    assert _answered(full)[0][2] > 0

    # Epoch 1: p0 moves past its records; nothing changed anywhere, so nothing comes back.
    r = _fetch(c, version, sid, 1, {0: 2})
    assert (r.error_code, r.session_id, _answered(r)) == (0, sid, {})

    # Epoch 2: new data on p2 only; the request lists no partition, the session reads all three.
    _produce(c, 2, 3)
    r = _fetch(c, version, sid, 2, {})
    got = _answered(r)
    assert r.session_id == sid and set(got) == {2} and got[2][:2] == (0, 3) and got[2][2] > 0

    # The same epoch again (a duplicate or a lost response): INVALID_FETCH_SESSION_EPOCH, and
    # the session is still there at the epoch it expects.
    r = _fetch(c, version, sid, 2, {})
    assert (r.error_code, r.session_id, _answered(r)) == (INVALID_FETCH_SESSION_EPOCH, 0, {})
    r = _fetch(c, version, sid, 3, {2: 3})
    assert (r.error_code, _answered(r)) == (0, {})

    # Forget p1: data there is no longer answered; p0 still is.
    r = _fetch(c, version, sid, 4, {}, forgotten=[1])
    assert r.error_code == 0
    _produce(c, 1, 1)
    _produce(c, 0, 1)
    r = _fetch(c, version, sid, 5, {})
    assert set(_answered(r)) == {0}

    # An unknown session id.
    r = _fetch(c, version, sid + 1 if sid < 0x7FFFFFFF else 1, 1, {})
    assert (r.error_code, r.session_id, _answered(r)) == (FETCH_SESSION_ID_NOT_FOUND, 0, {})

    # Epoch -1 closes it: a full, sessionless answer; the id is gone afterwards.
    r = _fetch(c, version, sid, -1, {0: 0, 1: 0})
    assert (r.error_code, r.session_id) == (0, 0) and set(_answered(r)) == {0, 1}
    r = _fetch(c, version, sid, 6, {})
    assert r.error_code == FETCH_SESSION_ID_NOT_FOUND


def test_a_parked_fetch_answers_a_partition_its_session_forgot_meanwhile(client: RawClient) -> None:
    """A session is not tied to a connection: while one incremental fetch long-polls, the session's
    next fetch may arrive on another connection and forget a partition. The parked fetch, woken by
    records on that partition, still answers with them (it read them for its own request), and
    neither connection gets an error."""
    c = client
    sid = _fetch(c, 12, 0, 0, {0: 2, 1: 0, 2: 0}).session_id
    assert sid > 0
    # Epoch 1 long-polls on the first connection: nothing new anywhere.
    req = FetchRequest(replica_id=-1, max_wait_ms=10_000, min_bytes=1, max_bytes=1 << 22, isolation_level=0,
                       session_id=sid, session_epoch=1, topics=[], forgotten_topics_data=[], rack_id="")
    req.with_header(correlation_id=9001, client_id="parked")
    c.sock.sendall(req.encode(version=12, header=True, framed=True))
    broker = c.broker  # type: ignore[attr-defined]
    with RawClient(broker.host, broker.port) as other:
        # Epoch 2 on the other connection forgets p1 (and long-polls no time).
        r = _fetch(other, 12, sid, 2, {}, forgotten=[1], max_wait_ms=0)
        assert r.error_code == 0 and r.session_id == sid
        _produce(other, 1, 2)  # wakes the parked fetch, which reads p1 for its own request
    resp = FetchResponse.decode(c.recv_frame(), version=12, header=True)
    assert resp.error_code == 0 and resp.session_id == sid
    got = _answered(resp)
    assert set(got) == {1} and got[1][:2] == (0, 2) and got[1][2] > 0
    # The session goes on without p1.
    _produce(c, 0, 1)
    _produce(c, 1, 1)
    r = _fetch(c, 12, sid, 3, {})
    assert r.error_code == 0 and set(_answered(r)) == {0}


def test_forgetting_every_partition_closes_the_session(client: RawClient) -> None:
    c = client
    sid = _fetch(c, 12, 0, 0, {0: 0, 1: 0}).session_id
    r = _fetch(c, 12, sid, 1, {}, forgotten=[0, 1])
    assert (r.error_code, r.session_id) == (0, 0)
    assert _fetch(c, 12, sid, 2, {}).error_code == FETCH_SESSION_ID_NOT_FOUND


def test_session_by_topic_id(client: RawClient) -> None:
    c = client
    T = MetadataRequest.MetadataRequestTopic
    md = c.roundtrip(MetadataRequest(topics=[T(name=TOPIC, topic_id=None)], allow_auto_topic_creation=False),
                     12, MetadataResponse)
    tid = md.topics[0].topic_id
    full = _fetch(c, 13, 0, 0, {0: 0, 1: 0}, topic=tid)
    sid = full.session_id
    assert sid > 0 and full.responses[0].topic_id == tid and set(_answered(full)) == {0, 1}
    _produce(c, 1, 2)
    r = _fetch(c, 13, sid, 1, {0: 2}, topic=tid)
    assert r.responses[0].topic_id == tid and set(_answered(r)) == {1}
    # A session opened by id cannot go on by name.
    r = _fetch(c, 12, sid, 2, {})
    assert r.error_code != 0 and not _answered(r)


def test_session_keeps_checking_the_leader_epoch_it_was_given(client: RawClient) -> None:
    """KIP-320 within a session: a partition's current leader epoch is cached with it and checked
    on every read of the session, also when a later incremental fetch does not name it (as Kafka's
    CachedPartition; a follower's session carries its epochs this way)."""
    c = client
    T = MetadataRequest.MetadataRequestTopic
    md = c.roundtrip(MetadataRequest(topics=[T(name=TOPIC, topic_id=None)], allow_auto_topic_creation=False),
                     12, MetadataResponse)
    epoch = {p.partition_index: p.leader_epoch for p in md.topics[0].partitions}[0]
    assert epoch >= 0
    full = _fetch(c, 12, 0, 0, {0: 0, 1: 0}, leader_epoch=epoch)
    sid = full.session_id
    assert sid > 0 and {p: a[0] for p, a in _answered(full).items()} == {0: 0, 1: 0}
    # p0 named with an epoch from the future: UNKNOWN_LEADER_EPOCH, now and on the next read
    r = _fetch(c, 12, sid, 1, {0: 2}, leader_epoch=epoch + 5)
    assert (r.error_code, _answered(r)) == (0, {0: (UNKNOWN_LEADER_EPOCH, -1, 0)})
    r = _fetch(c, 12, sid, 2, {})
    assert (r.error_code, _answered(r)) == (0, {0: (UNKNOWN_LEADER_EPOCH, -1, 0)})
    # named again with the leader's epoch: answered (its high watermark again) and quiet after
    r = _fetch(c, 12, sid, 3, {0: 2}, leader_epoch=epoch)
    assert (r.error_code, _answered(r)) == (0, {0: (0, 2, 0)})
    _produce(c, 1, 1)
    r = _fetch(c, 12, sid, 4, {})
    assert r.error_code == 0 and set(_answered(r)) == {1}


def test_cache_is_bounded(broker_factory: Any) -> None:
    b = broker_factory({"num.partitions": 3, "max.incremental.fetch.session.cache.slots": 1})
    with RawClient(b.host, b.port) as c:
        _create_topic(c)
        _produce(c, 0, 1)
        first = _fetch(c, 12, 0, 0, {0: 0, 1: 0}).session_id
        assert first > 0
        # The only slot is taken by an equally large, recently used session: no session (id 0).
        r = _fetch(c, 12, 0, 0, {0: 0, 2: 0})
        assert (r.error_code, r.session_id) == (0, 0) and set(_answered(r)) == {0, 2}
        assert _fetch(c, 12, first, 1, {}).error_code == 0
        # A larger session is worth more: it evicts the smaller one.
        second = _fetch(c, 12, 0, 0, {0: 0, 1: 0, 2: 0}).session_id
        assert second > 0 and second != first
        assert _fetch(c, 12, first, 2, {}).error_code == FETCH_SESSION_ID_NOT_FOUND
        assert _fetch(c, 12, second, 1, {}).error_code == 0
