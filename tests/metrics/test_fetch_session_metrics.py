"""``kafka.server:type=FetchSessionCache`` metrics against a real broker: exact Fetch frames
(the session steps of tests/integration/test_fetch_sessions.py) and a scrape after each step.

NumIncrementalFetchSessions and NumIncrementalFetchPartitionsCached must follow every way a
session's partitions change (a full fetch opening one, an incremental fetch adding or forgetting
partitions, a full fetch replacing a session, epoch -1 closing one, the last partition forgotten)
and IncrementalFetchSessionEvictionsPerSec must count a session evicted for a more valuable one.
The followers' sessions in a cluster are in tests/cluster/test_follower_fetch_sessions.py.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.integration.test_fetch_sessions import (
    FETCH_SESSION_ID_NOT_FOUND,
    _create_topic,
    _fetch,
    _produce,
)
from tests.support.brokers import BrokerProcess
from tests.support.metrics import scrape, value
from tests.support.net import free_port
from tests.support.rawclient import RawClient

pytestmark = pytest.mark.timeout(120)

PREFIX = "kafka_server_fetchsessioncache_"


def _cache(port: int) -> tuple[float, float, float]:
    """(sessions, partitions cached, evictions) as the broker reports them."""
    s = scrape(port)
    return (value(s, PREFIX + "numincrementalfetchsessions"), value(s, PREFIX + "numincrementalfetchpartitionscached"),
            value(s, PREFIX + "incrementalfetchsessionevictions_total"))


def test_cache_gauges_follow_sessions_and_evictions_are_counted(broker_factory: Callable[..., BrokerProcess]) -> None:
    port = free_port()
    b = broker_factory({"num.partitions": 3, "max.incremental.fetch.session.cache.slots": 1,
                        "metrics.listener": f"http://127.0.0.1:{port}"})
    with RawClient(b.host, b.port) as c:
        _create_topic(c)
        _produce(c, 0, 2)
        assert _cache(port) == (0, 0, 0)

        first = _fetch(c, 12, 0, 0, {0: 0, 1: 0}).session_id
        assert first > 0
        assert _cache(port) == (1, 2, 0)
        assert _fetch(c, 12, first, 1, {2: 0}).error_code == 0  # adds p2
        assert _cache(port) == (1, 3, 0)
        assert _fetch(c, 12, first, 2, {0: 2}, forgotten=[1]).error_code == 0  # moves p0, forgets p1
        assert _cache(port) == (1, 2, 0)
        # A rejected request (wrong epoch) changes nothing.
        assert _fetch(c, 12, first, 9, {1: 0}).error_code != 0
        assert _cache(port) == (1, 2, 0)

        # The only slot holds a 2-partition session: a 3-partition one is worth more and evicts it.
        second = _fetch(c, 12, 0, 0, {0: 0, 1: 0, 2: 0}).session_id
        assert second > 0 and second != first
        assert _fetch(c, 12, first, 3, {}).error_code == FETCH_SESSION_ID_NOT_FOUND
        assert _cache(port) == (1, 3, 1)
        # A smaller one is not: no session (id 0), nothing evicted.
        assert _fetch(c, 12, 0, 0, {0: 0}).session_id == 0
        assert _cache(port) == (1, 3, 1)

        # A full fetch naming its session replaces it (closed, then opened anew): not an eviction.
        third = _fetch(c, 12, second, 0, {1: 0}).session_id
        assert third > 0
        assert _cache(port) == (1, 1, 1)
        # Forgetting the last partition closes the session.
        assert _fetch(c, 12, third, 1, {}, forgotten=[1]).session_id == 0
        assert _cache(port) == (0, 0, 1)
        # Epoch -1 closes one too.
        fourth = _fetch(c, 12, 0, 0, {0: 0, 2: 0}).session_id
        assert _cache(port) == (1, 2, 1)
        assert _fetch(c, 12, fourth, -1, {0: 0}).session_id == 0
        assert _cache(port) == (0, 0, 1)
