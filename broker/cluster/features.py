"""Feature flags (KIP-584): the features this broker supports and the levels finalized for it.

A feature is a named integer level that clients read from ApiVersions (v3+) to decide which
protocol to speak. The one Samsa has is Kafka's ``transaction.version`` (KIP-890): level 2 is
transactions v2 -- Java 4.x producers then end transactions with EndTxn v5 and let Produce
v12 / TxnOffsetCommit v5 add partitions implicitly; levels 0 and 1 keep them on transactions
v1. A new broker finalizes level 2, as a Kafka 4.0+ cluster formatted with its defaults does.

Finalized levels are changed with UpdateFeatures (``kafka-features.sh upgrade/downgrade``). A
feature finalized at level 0 is absent, as in Kafka. Where they live:

* a single broker keeps them in ``features.json`` in its first log directory (``{"epoch": N,
  "features": {...}}``, written to a temporary file and renamed), so they survive restarts; the
  epoch counts changes;
* in a cluster they are Kafka's ZooKeeper-mode ``/feature`` znode, written by the controller
  (conditionally on the znode version) and watched by every broker, which answers ApiVersions
  from its copy; the epoch is the znode version + 1 (0 while the znode does not exist and the
  defaults apply).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from .support import ClusterBroker
from .zk_data import FEATURE as FEATURE_ZNODE

if TYPE_CHECKING:  # a single broker imports no ZooKeeper client
    from .zk.client import KafkaZkClient

log = logging.getLogger("samsa.features")

TRANSACTION_VERSION = "transaction.version"
# name -> (min supported level, max supported level)
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {TRANSACTION_VERSION: (0, 2)}
DEFAULT_FINALIZED: dict[str, int] = {TRANSACTION_VERSION: 2}


class FinalizedFeatures:
    """The finalized levels and their epoch; every change is persisted before it is visible."""

    def __init__(self) -> None:
        self.levels: dict[str, int] = dict(DEFAULT_FINALIZED)
        self.epoch = 0

    def level(self, name: str) -> int:
        return self.levels.get(name, 0)

    def merged(self, levels: dict[str, int]) -> dict[str, int]:
        return {k: v for k, v in {**self.levels, **levels}.items() if v > 0}

    async def update(self, levels: dict[str, int]) -> None:
        raise NotImplementedError


class FileFinalizedFeatures(FinalizedFeatures):
    """A single broker's levels, in ``features.json``."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        if path.exists():
            try:
                data = json.loads(path.read_text())
                self.levels = {str(k): int(v) for k, v in data["features"].items() if int(v) > 0}
                self.epoch = int(data["epoch"])
            except (OSError, ValueError, KeyError, TypeError) as e:
                log.warning("Ignoring unreadable %s (%s): features stay at their defaults", path, e)

    async def update(self, levels: dict[str, int]) -> None:
        new = self.merged(levels)
        tmp = self.path.with_suffix(".tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump({"epoch": self.epoch + 1, "features": new}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self.levels, self.epoch = new, self.epoch + 1
        log.info("Finalized features are now %s (epoch %d)", new, self.epoch)


class ZkFinalizedFeatures(FinalizedFeatures):
    """A cluster's levels: this broker's copy of ``/feature``, kept current by a watch."""

    def __init__(self, zk: KafkaZkClient) -> None:
        super().__init__()
        self.zk = zk
        self.version: int | None = None  # of the znode; None while it does not exist
        # Once, on a ZooKeeper request thread (see load()); the watch keeps it current. Raises
        # while ZooKeeper is unreachable: the broker answers with the defaults meanwhile.
        self._apply(zk.get_features())
        zk.watch_data(FEATURE_ZNODE, lambda _data: asyncio.ensure_future(self._refresh()))

    def _apply(self, got: tuple[dict[str, int], int] | None) -> None:
        if got is None:
            self.levels, self.version, self.epoch = dict(DEFAULT_FINALIZED), None, 0
        elif self.version is None or got[1] >= self.version:
            self.levels, self.version, self.epoch = got[0], got[1], got[1] + 1

    async def _refresh(self) -> None:
        try:
            self._apply(await asyncio.to_thread(self.zk.get_features))
        except Exception as e:  # the session is gone: the next watch event brings the news
            log.warning("Could not read /feature: %s", e)

    async def update(self, levels: dict[str, int]) -> None:
        """The controller's write, conditional on the znode version it last saw (an error if another
        write came in between: the request fails and may be retried)."""
        new = self.merged(levels)
        version = await self.zk.call(self.zk.set_features, new, self.version)
        self._apply((new, version))
        log.info("Finalized features are now %s (epoch %d)", new, self.epoch)


_BY_BROKER: weakref.WeakKeyDictionary[ClusterBroker, FinalizedFeatures] = weakref.WeakKeyDictionary()


_LOADING: weakref.WeakKeyDictionary[ClusterBroker, asyncio.Task[None]] = weakref.WeakKeyDictionary()


def finalized(broker: ClusterBroker) -> FinalizedFeatures:
    """The broker's finalized features: from ZooKeeper in a cluster (read at start-up by
    :func:`load`, off the event loop), else from its first log directory (read on first use).
    A cluster broker whose read has not succeeded yet answers with the defaults and reads again
    in the background: ApiVersions never waits for ZooKeeper."""
    f = _BY_BROKER.get(broker)
    if f is None:
        if broker.metadata_support.zookeeper is not None:
            _loading(broker)
            return FinalizedFeatures()
        f = FileFinalizedFeatures(Path(broker.config.log_dirs[0]) / "features.json")
        _BY_BROKER[broker] = f
    return f


async def load(broker: ClusterBroker) -> None:
    """A cluster broker's copy of ``/feature``, read on a ZooKeeper request thread (once)."""
    if broker.metadata_support.zookeeper is not None and broker not in _BY_BROKER:
        await _loading(broker)


def _loading(broker: ClusterBroker) -> asyncio.Task[None]:
    task = _LOADING.get(broker)
    if task is None:
        task = asyncio.get_running_loop().create_task(_load(broker))
        _LOADING[broker] = task
        task.add_done_callback(lambda _t: _LOADING.pop(broker, None))
    return task


async def _load(broker: ClusterBroker) -> None:
    zk = broker.metadata_support.zookeeper
    if zk is None:
        return
    try:
        _BY_BROKER[broker] = await zk.call(ZkFinalizedFeatures, zk)
    except Exception as e:  # ZooKeeper unreachable: never fail ApiVersions for it
        log.warning("Could not read /feature (%s): answering with the default features for now", e)
