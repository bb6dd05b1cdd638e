"""A replica fetcher stops when the broker shuts down, even if its task swallows a cancellation.

Python 3.11's ``asyncio.wait_for`` (under every inter-broker request) drops a cancellation that
arrives as the request completes (gh-86296): the fetch loop then goes on. Awaiting the task once
after cancelling it hung a broker's shutdown until SIGKILL (CI, 2026-11-28: the broker had begun
to follow a new leader a millisecond before its SIGTERM). ``ReplicaFetcher.stop`` cancels until
the task is done. The task here behaves as that loop did: the first cancellation is lost.
"""

from __future__ import annotations

import asyncio
import types
from pathlib import Path

from broker.cluster.replication.fetcher import ReplicaFetcher
from broker.config.properties import BrokerConfig


def test_a_fetcher_whose_loop_lost_a_cancellation_still_stops(tmp_path: Path) -> None:
    async def scenario() -> None:
        config = BrokerConfig.load(None, {"log.dirs": str(tmp_path)})
        fetcher = ReplicaFetcher(types.SimpleNamespace(broker_id=0, config=config), leader_id=1)  # type: ignore[arg-type]
        cancellations = []

        async def loop_that_loses_one_cancellation() -> None:
            while True:
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    cancellations.append(1)
                    if len(cancellations) == 1:
                        continue  # lost, as wait_for loses it: the loop goes on
                    raise

        fetcher.task = asyncio.get_running_loop().create_task(loop_that_loses_one_cancellation())
        await asyncio.sleep(0)
        stopping = asyncio.get_running_loop().create_task(fetcher.stop())
        done, _pending = await asyncio.wait({stopping}, timeout=5)  # a hang, not a speed, is what fails
        assert stopping in done, "ReplicaFetcher.stop() hangs on a fetch loop that lost a cancellation"
        assert fetcher.task.done() and fetcher.task.cancelled()
        assert len(cancellations) == 2

    asyncio.run(scenario())
