"""Transactions with aiokafka against a live broker (beyond issue #4's list of clients).

aiokafka's transactional AIOKafkaProducer commits and aborts across 3 topics x 3 partitions;
its read_committed consumer (and librdkafka's) sees exactly the committed transactions, and a
second producer with the same transactional id fences the first.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError as AIOKafkaError

from tests.txn.compat_support import assert_same, create_topics, merge, read_all, tp_list, txn_values


async def _txn(p: AIOKafkaProducer, values: dict[tuple[str, int], list[bytes]], commit: bool) -> None:
    await p.begin_transaction()
    futs = [await p.send(t, value=v, partition=part) for (t, part), vs in values.items() for v in vs]
    await asyncio.gather(*futs)
    if commit:
        await p.commit_transaction()
    else:
        await p.abort_transaction()


async def _read(bootstrap: str, isolation: str, expect: int) -> dict[tuple[str, int], list[bytes]]:
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                         auto_offset_reset="earliest")
    await c.start()
    out: dict[tuple[str, int], list[bytes]] = {tp: [] for tp in tp_list()}
    try:
        c.assign([TopicPartition(t, p) for t, p in tp_list()])
        await c.seek_to_beginning()
        n, idle = 0, 0
        while idle < 4 and (n < expect or idle < 4):
            batch = await c.getmany(timeout_ms=500)
            if not batch:
                idle += 1
                continue
            idle = 0
            for tp, ms in batch.items():
                out[(tp.topic, tp.partition)].extend(m.value or b"" for m in ms)
                n += len(ms)
        return out
    finally:
        await c.stop()


def test_commit_and_abort_across_partitions(broker_factory: Any) -> None:
    b = broker_factory()
    create_topics(b.bootstrap)
    t1, t2, t3 = txn_values("c1"), txn_values("a2"), txn_values("c3")

    async def main() -> tuple[Any, Any]:
        p = AIOKafkaProducer(bootstrap_servers=b.bootstrap, transactional_id="aio-3x3")
        await p.start()
        try:
            await _txn(p, t1, True)
            await _txn(p, t2, False)
            await _txn(p, t3, True)
        finally:
            await p.stop()
        return await _read(b.bootstrap, "read_committed", 90), await _read(b.bootstrap, "read_uncommitted", 135)

    committed, everything = asyncio.run(main())
    assert_same(committed, merge(t1, t3), "aiokafka read_committed")
    assert_same(everything, merge(t1, t2, t3), "aiokafka read_uncommitted")
    assert_same(read_all(b.bootstrap, tp_list(), "read_committed", expect=90), merge(t1, t3), "librdkafka")


def test_second_producer_fences_the_first(broker_factory: Any) -> None:
    b = broker_factory()
    create_topics(b.bootstrap)

    async def main() -> None:
        zombie = AIOKafkaProducer(bootstrap_servers=b.bootstrap, transactional_id="aio-fence")
        fresh = AIOKafkaProducer(bootstrap_servers=b.bootstrap, transactional_id="aio-fence")
        await zombie.start()
        try:
            await zombie.begin_transaction()
            await (await zombie.send("txn-t0", value=b"zombie", partition=0))
            await fresh.start()  # InitProducerId: aborts the zombie's transaction, bumps the epoch
            with pytest.raises(AIOKafkaError):
                await (await zombie.send("txn-t0", value=b"zombie-2", partition=0))
                await zombie.commit_transaction()
            await _txn(fresh, {("txn-t0", 0): [b"fresh"]}, True)
        finally:
            await fresh.stop()
            try:
                await zombie.stop()
            except AIOKafkaError:
                pass

    asyncio.run(main())
    assert read_all(b.bootstrap, [("txn-t0", 0)], "read_committed", expect=1) == {("txn-t0", 0): [b"fresh"]}
