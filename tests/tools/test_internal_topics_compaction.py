"""``__consumer_offsets`` is compacted by the log cleaner, and the group coordinator still
loads the right committed offsets from the compacted log after a restart.

The internal topic's segments are made small through the admin API (as an operator would
with ``samsa configs``), a consumer commits 300 offsets, the cleaner reduces the group's
partition to the latest commit per key, and ``samsa dump-log --offsets-decoder`` shows it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata, TopicPartition

from groupcoord.records import partition_for

pytestmark = pytest.mark.timeout(180)


def samsa(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_consumer_offsets_compacted_and_reloaded(broker_factory: Any) -> None:
    broker = broker_factory({"log.cleaner.backoff.ms": "300"})
    b = broker.bootstrap
    samsa("topics", "--bootstrap-server", b, "--create", "--topic", "work", "--partitions", "1")
    consumer = KafkaConsumer(bootstrap_servers=b, group_id="compacted-group", enable_auto_commit=False)
    tp = TopicPartition("work", 0)
    consumer.assign([tp])
    consumer.commit({tp: OffsetAndMetadata(0, "", -1)})  # creates __consumer_offsets
    samsa("configs", "--bootstrap-server", b, "--alter", "--topic", "__consumer_offsets",
          "--add-config", "segment.bytes=2000,min.cleanable.dirty.ratio=0.01")
    for i in range(1, 301):
        consumer.commit({tp: OffsetAndMetadata(i, f"m{i}", -1)})
    consumer.close(autocommit=False)

    pdir = broker.data_dir / f"__consumer_offsets-{partition_for('compacted-group')}"

    def commits_on_disk() -> list[Any]:
        docs = json.loads(samsa("dump-log", "--files", str(pdir), "--offsets-decoder", "--json"))
        return [r for d in docs if d["type"] == "log" for bt in d["batches"] for r in bt.get("records", [])
                if isinstance(r.get("key"), dict) and r["key"].get("group") == "compacted-group"
                and r["key"].get("topic") == "work"]

    def active_base() -> int:
        return max(int(f.name.split(".")[0]) for f in pdir.glob("*.log"))

    def compacted() -> list[Any] | None:
        recs = commits_on_disk()
        closed = [r for r in recs if r["offset"] < active_base()]
        return recs if len(closed) == 1 else None  # one commit per key in closed segments

    deadline = time.monotonic() + 60
    while (recs := compacted()) is None and time.monotonic() < deadline:  # type: ignore[assignment]
        time.sleep(0.5)
    assert recs is not None, "closed segments of __consumer_offsets were not compacted"
    assert len(recs) < 30, "the active segment (2000 bytes) holds the rest"
    assert recs[-1]["payload"]["offset"] == 300
    assert recs[-1]["offset"] >= 300, "301 commits were written; the cleaner kept the last ones"
    assert (broker.data_dir / "cleaner-offset-checkpoint").exists()

    broker.restart()
    admin = KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=10000)
    try:
        got = admin.list_group_offsets("compacted-group")["compacted-group"]
    finally:
        admin.close()
    assert got[tp].offset == 300 and got[tp].metadata == "m300"
