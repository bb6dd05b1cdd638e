"""The group coordinator driven without sockets: virtual time (ManualScheduler), an in-memory
``__consumer_offsets`` (MemoryOffsetsStorage), and the calls the request handlers make.

Shared by the state-machine tests of the coordinator (tests/groupcoord/test_coordinator*.py).
"""

from __future__ import annotations

import asyncio
import functools
import struct
from collections.abc import Callable, Coroutine
from typing import Any

from groupcoord.coordinator import GroupConfig, GroupCoordinator, JoinGroupResult
from groupcoord.records import decode_key, partition_for
from groupcoord.state import GroupState
from groupcoord.storage import MemoryOffsetsStorage
from groupcoord.timer import ManualScheduler
from protocol.errors import ErrorCode

E = ErrorCode
SESSION = 10_000
REBALANCE = 30_000


def async_test(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))
    return wrapper


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def protos(*names: str, topics: tuple[str, ...] = ("t",)) -> list[tuple[str, bytes]]:
    return [(n, subscription(*topics)) for n in names]


class Harness:
    def __init__(self, storage: MemoryOffsetsStorage | None = None, **cfg: Any) -> None:
        cfg.setdefault("group_initial_rebalance_delay_ms", 0)
        self.sched = ManualScheduler()
        self.storage = storage or MemoryOffsetsStorage()
        self.config = GroupConfig(**cfg)
        self.coord = GroupCoordinator(self.storage, self.config, self.sched)

    async def start(self) -> Harness:
        await self.coord.startup()
        return self

    async def settle(self) -> None:
        for _ in range(3):
            self.sched.advance(0)  # timers due now (e.g. a zero initial delay)
            for _ in range(5):
                await asyncio.sleep(0)
            await self.coord.idle()

    async def advance(self, ms: int) -> None:
        await self.settle()  # let requests issued so far reach the coordinator at the current time
        self.sched.advance(ms)
        await self.settle()

    def join(self, group: str = "g", member_id: str = "", *, names: tuple[str, ...] = ("range",),
             protocols: list[tuple[str, bytes]] | None = None, session: int = SESSION,
             rebalance: int = REBALANCE, instance: str | None = None, require_known: bool = False,
             client_id: str = "c", protocol_type: str = "consumer",
             skip_assignment_ok: bool = False) -> asyncio.Task[JoinGroupResult]:
        return asyncio.ensure_future(self.coord.join_group(
            group, member_id, protocol_type, protocols if protocols is not None else protos(*names),
            session, rebalance, group_instance_id=instance, client_id=client_id,
            client_host="/127.0.0.1", require_known_member_id=require_known,
            supports_skip_assignment=skip_assignment_ok))

    def sync(self, group: str, gen: int, member_id: str, assignment: dict[str, bytes] | None = None,
             instance: str | None = None, **kw: Any) -> asyncio.Task[Any]:
        return asyncio.ensure_future(self.coord.sync_group(
            group, gen, member_id, assignment or {}, group_instance_id=instance, **kw))

    def group(self, gid: str = "g") -> Any:
        return self.coord.groups[gid]

    def records(self, gid: str = "g") -> list[tuple[Any, bytes | None]]:
        log = self.storage.partitions.get(partition_for(gid, self.config.offsets_topic_num_partitions), [])
        return [(decode_key(k), v) for k, v in log]

    async def stable_group(self, n: int, gid: str = "g", **kw: Any) -> list[str]:
        """Form a Stable group of ``n`` dynamic members; returns member ids (leader first)."""
        tasks = [self.join(gid, **kw) for _ in range(n)]
        await self.settle()
        results = [await t for t in tasks]
        leader = results[0].leader_id
        gen = results[0].generation_id
        ids = [r.member_id for r in results]
        assignment = {m: f"a-{m}".encode() for m in ids}
        syncs = [self.sync(gid, gen, m, assignment if m == leader else None) for m in ids]
        await self.settle()
        for s in syncs:
            assert (await s).error == E.NONE
        assert self.group(gid).state is GroupState.STABLE
        return [leader] + [m for m in ids if m != leader]


async def static_group(h: Harness) -> tuple[str, str]:
    """Two static members (instance ids i1, i2) in a Stable group; their member ids."""
    t1 = h.join(instance="i1", client_id="c1")
    t2 = h.join(instance="i2", client_id="c2")
    await h.settle()
    r1, r2 = await t1, await t2
    leader = r1.leader_id
    s1 = h.sync("g", 1, r1.member_id, {r1.member_id: b"A1", r2.member_id: b"A2"}, instance="i1")
    s2 = h.sync("g", 1, r2.member_id, instance="i2")
    await h.settle()
    assert (await s1).error == (await s2).error == E.NONE
    assert leader == r1.member_id and r1.member_id.startswith("i1-")
    return r1.member_id, r2.member_id
