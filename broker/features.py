"""Feature flags (KIP-584): the features this broker supports and the levels finalized for it.

A feature is a named integer level that clients read from ApiVersions (v3+) to decide which
protocol to speak. The one Samsa has is Kafka's ``transaction.version`` (KIP-890): level 2 is
transactions v2 -- Java 4.x producers then end transactions with EndTxn v5 and let Produce
v12 / TxnOffsetCommit v5 add partitions implicitly; levels 0 and 1 keep them on transactions
v1. A new broker finalizes level 2, as a Kafka 4.0+ cluster formatted with its defaults does.

Finalized levels are changed with UpdateFeatures (``kafka-features.sh upgrade/downgrade``) and
kept in ``features.json`` in the first log directory (``{"epoch": N, "features": {...}}``,
written to a temporary file and renamed), so they survive restarts; the epoch counts changes.
A feature finalized at level 0 is absent, as in Kafka. In a multi-broker cluster each broker
keeps its own file: UpdateFeatures is refused there (``broker/apis/update_features.py``).
"""

from __future__ import annotations

import json
import logging
import os
import weakref
from pathlib import Path
from typing import Any

log = logging.getLogger("samsa.features")

TRANSACTION_VERSION = "transaction.version"
# name -> (min supported level, max supported level)
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {TRANSACTION_VERSION: (0, 2)}
DEFAULT_FINALIZED: dict[str, int] = {TRANSACTION_VERSION: 2}


class FinalizedFeatures:
    """The finalized levels and their epoch; every change is persisted before it is visible."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.levels: dict[str, int] = dict(DEFAULT_FINALIZED)
        self.epoch = 0
        if path.exists():
            try:
                data = json.loads(path.read_text())
                self.levels = {str(k): int(v) for k, v in data["features"].items() if int(v) > 0}
                self.epoch = int(data["epoch"])
            except (OSError, ValueError, KeyError, TypeError) as e:
                log.warning("Ignoring unreadable %s (%s): features stay at their defaults", path, e)

    def level(self, name: str) -> int:
        return self.levels.get(name, 0)

    def update(self, levels: dict[str, int]) -> None:
        new = {**self.levels, **levels}
        new = {k: v for k, v in new.items() if v > 0}
        tmp = self.path.with_suffix(".tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump({"epoch": self.epoch + 1, "features": new}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self.levels, self.epoch = new, self.epoch + 1
        log.info("Finalized features are now %s (epoch %d)", new, self.epoch)


_BY_BROKER: weakref.WeakKeyDictionary[Any, FinalizedFeatures] = weakref.WeakKeyDictionary()


def finalized(broker: Any) -> FinalizedFeatures:
    """The broker's finalized features, read from its first log directory on first use."""
    f = _BY_BROKER.get(broker)
    if f is None:
        f = _BY_BROKER[broker] = FinalizedFeatures(Path(broker.config.log_dirs[0]) / "features.json")
    return f
