"""Replica fetchers keep an incremental fetch session (KIP-227) with each leader, in a 3-broker
cluster with a real ZooKeeper, seen through the leaders' FetchSessionCache metrics.

* Every follower of a partition opens a session on its leader (before 884f2f0 follower fetches
  were sessionless and no broker cached any session), and records produced with acks=all reach
  every replica through those sessions.
* A leader that forgets a follower's session (evicted for a more valuable one, as
  ``max.incremental.fetch.session.cache.slots`` allows) answers its next incremental fetch with
  FETCH_SESSION_ID_NOT_FOUND; the follower opens a new session with a full fetch and goes on
  replicating: acks=all with min.insync.replicas=3 succeeds and every replica holds the records.
* A leader killed and restarted (its cache gone with it): the followers open sessions with the
  new leader, the restarted broker too once it follows, and acks=all goes on.
"""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from tests.cluster.conftest import ClusterFactory
from tests.integration.test_fetch_sessions import FETCH_SESSION_ID_NOT_FOUND, _fetch
from tests.support.cluster import SamsaCluster
from tests.support.metrics import Samples, scrape, value, values
from tests.support.net import free_port
from tests.support.rawclient import RawClient
from tests.support.replicas import (
    admin,
    assert_replicas_identical,
    create_topic,
    partitions,
    wait_for,
    wait_full_isr,
)

PREFIX = "kafka_server_fetchsessioncache_"
SESSIONS = PREFIX + "numincrementalfetchsessions"
PARTITIONS = PREFIX + "numincrementalfetchpartitionscached"
EVICTIONS = PREFIX + "incrementalfetchsessionevictions_total"


def _metered_cluster(cluster_factory: ClusterFactory, overrides: dict[int, dict[str, object]] | None = None,
                     ) -> tuple[SamsaCluster, dict[int, int]]:
    ports = {i: free_port() for i in range(3)}
    props = {i: {"metrics.listener": f"http://127.0.0.1:{p}", **(overrides or {}).get(i, {})}
             for i, p in ports.items()}
    return cluster_factory(3, broker_overrides=props), ports


def _cache(port: int) -> tuple[float, float, float]:
    """(sessions, partitions cached, evictions) as one broker reports them."""
    s = scrape(port)
    return value(s, SESSIONS), value(s, PARTITIONS), value(s, EVICTIONS)


def _wait_cache(port: int, want: tuple[float, ...], what: str, *, exact: bool = False,
                timeout: float = 30) -> tuple[float, float, float]:
    """Wait until one broker's (sessions, partitions cached, evictions) are ``want`` (``exact``),
    or at least the first ``len(want)`` of them."""
    seen: list[tuple[float, float, float]] = []

    def check() -> tuple[float, float, float] | None:
        got = _cache(port)
        seen.append(got)
        ok = got == want if exact else all(g >= w for g, w in zip(got, want, strict=False))
        return got if ok else None

    try:
        return wait_for(check, timeout, what)  # type: ignore[no-any-return]
    except AssertionError as e:
        raise AssertionError(f"{e}; (sessions, partitions, evictions) last seen: {seen[-1:]}") from None


def _log_end_offsets(s: Samples, topic: str) -> dict[int, float]:
    """partition -> log end offset of the replicas a broker hosts of ``topic``."""
    return {int(dict(lab)["partition"]): v for lab, v in values(s, "kafka_log_log_logendoffset").items()
            if ("topic", topic) in lab}


def _produce_all(cluster: SamsaCluster, topic: str, n: int, partitions: int) -> None:
    acked: list[int] = []
    prod = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 2,
                     "message.timeout.ms": 20000})
    for i in range(n):
        prod.produce(topic, value=b"v%d" % i, partition=i % partitions,
                     on_delivery=lambda err, _m: acked.append(1) if err is None else None)
    assert prod.flush(30) == 0
    assert len(acked) == n, "every record acknowledged by all in-sync replicas"


def test_followers_fetch_through_incremental_sessions(cluster_factory: ClusterFactory) -> None:
    cluster, ports = _metered_cluster(cluster_factory)
    topic = f"fs-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, 3, 3, {"min.insync.replicas": "3"})
    ps = wait_full_isr(cluster, topic, 3)
    # the brokers that follow a partition led by each broker, and how many partitions each leads
    followers = {i: {r for m in ps.values() if m.leader == i for r in m.replicas if r != i} for i in range(3)}
    followed = {i: sum(len(m.replicas) - 1 for m in ps.values() if m.leader == i) for i in range(3)}
    assert all(followers.values()), f"leaders spread over the brokers: {ps}"

    for i in range(3):  # before 884f2f0 follower fetches were sessionless: no broker cached one
        _wait_cache(ports[i], (len(followers[i]), followed[i]),
                    f"broker {i} to cache a session for each of its followers {sorted(followers[i])} "
                    f"over the {followed[i]} partition replicas they follow")

    n = 600
    _produce_all(cluster, topic, n, 3)

    def replicated() -> dict[int, Samples] | None:
        s = {i: scrape(ports[i]) for i in range(3)}
        leo = {i: _log_end_offsets(s[i], topic) for i in range(3)}
        return s if all(leo[i] == {p: n // 3 for p in range(3)} for i in range(3)) else None

    s = wait_for(replicated, 30, f"every replica of {topic} to reach log end offset {n // 3}")
    assert_replicas_identical(cluster, topic, 3, {p: list(m.replicas) for p, m in ps.items()})
    for i in range(3):  # the sessions outlived the traffic: nothing evicted, the followers still in them
        assert value(s[i], EVICTIONS) == 0
        assert value(s[i], SESSIONS) >= len(followers[i]) and value(s[i], PARTITIONS) >= followed[i]


def test_follower_recovers_when_its_leader_forgets_its_session(cluster_factory: ClusterFactory) -> None:
    """Broker 0 leads one partition that brokers 1 and 2 follow, and has room for two sessions:
    a consumer's 2-partition session evicts a follower's 1-partition one; that follower's next
    incremental fetch gets FETCH_SESSION_ID_NOT_FOUND, and its full fetch takes the consumer's
    slot back (a follower's session is worth more than a consumer's)."""
    cluster, ports = _metered_cluster(cluster_factory, {0: {"max.incremental.fetch.session.cache.slots": 2}})
    topic, other = f"fs-{uuid.uuid4().hex[:8]}", f"fsc-{uuid.uuid4().hex[:8]}"
    a = admin(cluster)  # must outlive the futures
    fs = a.create_topics([
        NewTopic(topic, num_partitions=1, replica_assignment=[[0, 1, 2]], config={"min.insync.replicas": "3"}),
        NewTopic(other, num_partitions=2, replica_assignment=[[0], [0]])], request_timeout=30)
    for f in fs.values():
        f.result(30)
    ps = wait_full_isr(cluster, topic, 3)
    assert ps[0].leader == 0
    _produce_all(cluster, topic, 100, 1)

    _wait_cache(ports[0], (2, 2, 0), exact=True, what="broker 0 to cache its two followers' sessions")

    leader = cluster[0]
    with RawClient(leader.host, leader.port) as c:
        consumer = _fetch(c, 12, 0, 0, {0: 0, 1: 0}, topic=other)
        assert consumer.error_code == 0 and consumer.session_id > 0, "the consumer's session evicted a follower's"
        _wait_cache(ports[0], (2, 2, 2), exact=True,
                    what="the evicted follower to open a new session in the consumer's place")
        assert _fetch(c, 12, consumer.session_id, 1, {}, topic=other).error_code == FETCH_SESSION_ID_NOT_FOUND
    s = scrape(ports[0])
    assert value(s, "kafka_network_requestmetrics_errors_total", request="Fetch",
                 error="FETCH_SESSION_ID_NOT_FOUND") >= 2  # the follower's, then ours

    # Replication goes on through the new session: acks=all needs all three replicas.
    _produce_all(cluster, topic, 200, 1)
    wait_for(lambda: all(_log_end_offsets(scrape(ports[i]), topic) == {0: 300} for i in range(3)), 30,
             "every replica to reach log end offset 300")
    assert_replicas_identical(cluster, topic, 1, {0: [0, 1, 2]})
    wait_full_isr(cluster, topic, 3)
    assert _cache(ports[0]) == (2, 2, 2)


def test_sessions_form_again_after_the_leader_restarts(cluster_factory: ClusterFactory) -> None:
    """The leader killed: its followers lose their sessions with it (the connection breaks and
    the restarted broker's cache starts empty); the new leader's follower, and the restarted
    broker once it follows, open sessions with whoever leads now, and acks=all goes on."""
    cluster, ports = _metered_cluster(cluster_factory)
    topic = f"fs-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, 1, 3, {"min.insync.replicas": "2"})
    old = wait_full_isr(cluster, topic, 3)[0].leader
    # (at least: a full fetch whose answer is lost leaves a session behind on the leader, as in Kafka)
    _wait_cache(ports[old], (2, 2), f"broker {old} to cache its two followers' sessions")
    _produce_all(cluster, topic, 100, 1)

    cluster.kill(old)
    new: int = wait_for(lambda: next(([m.leader] for m in partitions(cluster, topic).values()
                                      if m.leader not in (-1, old)), None), 30, "a new leader")[0]
    _wait_cache(ports[new], (1, 1), f"the new leader {new} to cache its follower's session")
    _produce_all(cluster, topic, 100, 1)  # acks=all with the two brokers left
    cluster.restart(old)
    leader = wait_full_isr(cluster, topic, 3)[0].leader  # the restarted broker caught up
    _wait_cache(ports[leader], (2, 2), f"the leader {leader} to cache both followers' sessions")
    _produce_all(cluster, topic, 100, 1)
    wait_for(lambda: all(_log_end_offsets(scrape(ports[i]), topic) == {0: 300} for i in range(3)), 30,
             "every replica to reach log end offset 300")
    assert_replicas_identical(cluster, topic, 1, {0: [0, 1, 2]})
