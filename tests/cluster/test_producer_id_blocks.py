"""Producer-id blocks claimed from a real ZooKeeper (``ZkProducerIdManager``).

A claim runs on a ZooKeeper request thread; the broker's event loop attaches its completion
callback after submitting it. When the request thread finishes first (a loaded machine can switch
threads between the two), the callback runs at once on the submitting thread. It once did so while
that thread held the manager's lock, which the callback takes too: the broker's event loop
deadlocked right after logging "Claimed producer id block" and never finished starting.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from broker.cluster.zk.client import KafkaZkClient
from broker.cluster.zk.cluster import ZkProducerIdManager
from broker.cluster.zk.server import ZooKeeperServer

T = TypeVar("T")


class _FinishedFirst(KafkaZkClient):
    """A ZooKeeper client whose submitted requests have completed before submit() returns: the
    request thread always wins the race with the caller."""

    def submit(self, fn: Callable[..., T], *args: object) -> Future[T]:
        fut = super().submit(fn, *args)
        fut.result(30)
        return fut


def _in_thread(fn: Callable[[], object], timeout: float = 30.0) -> object:
    """Run ``fn`` on a daemon thread; fail (not hang) if it never returns, as on a deadlock."""
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # reported below
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "deadlocked: the claim's completion callback waited for a lock its caller held"
    if "error" in out:
        raise AssertionError(f"raised {out['error']!r}")
    return out.get("value")


def test_a_claim_that_finishes_before_its_callback_is_attached(shared_zookeeper: ZooKeeperServer) -> None:
    zk = _FinishedFirst(f"{shared_zookeeper.connect_string}/pid-blocks-race")
    zk.start()
    try:
        ids = ZkProducerIdManager(zk, broker_id=7)
        fut = _in_thread(ids._prefetch)
        assert isinstance(fut, Future) and fut.done()
        first_block = fut.result()
        # the block was taken in: ids come from it, in order, without asking ZooKeeper again
        pids = [ids.generate_producer_id() for _ in range(3)]
        assert pids == [first_block[0], first_block[0] + 1, first_block[0] + 2]
        # a second manager (another broker) claims a later, disjoint block from the same znode
        other = ZkProducerIdManager(zk, broker_id=8)
        second_block = _in_thread(lambda: other._prefetch().result(30))
        assert isinstance(second_block, tuple) and second_block[0] > first_block[1]
    finally:
        zk.close()
