"""Shared pieces of the transactional compat tests (compat_tests/test_txn_*.py).

The reference reader is confluent-kafka (librdkafka): it honours ``isolation.level`` exactly
as Kafka's consumers do (aborted_transactions, LSO, control batches skipped). Every check
compares what was read with what each transaction wrote.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

CTP_APP = Path(__file__).resolve().parent / "ctp_app.py"
FAST_TXN = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 200}
TOPICS = [f"txn-t{i}" for i in range(3)]
PARTITIONS = 3
PER_PARTITION = 5


def tp_list() -> list[tuple[str, int]]:
    return [(t, p) for t in TOPICS for p in range(PARTITIONS)]


def txn_values(tag: str, per_partition: int = PER_PARTITION) -> dict[tuple[str, int], list[bytes]]:
    """The messages a transaction tagged ``tag`` writes: ``per_partition`` to each of the 9 partitions."""
    return {(t, p): [f"{tag}-{t}-{p}-{i}".encode() for i in range(per_partition)] for t, p in tp_list()}


def create_topics(bootstrap: str, topics: Iterable[str] = TOPICS, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futs = admin.create_topics([NewTopic(t, partitions, 1) for t in topics], operation_timeout=20)
    for f in futs.values():
        f.result(30)


def end_offsets(bootstrap: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """High watermarks (read_uncommitted end offsets)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-probe", "enable.auto.commit": False})
    try:
        out = {}
        for t, p in tps:
            _lo, hi = c.get_watermark_offsets(TopicPartition(t, p), timeout=20)
            out[(t, p)] = hi
        return out
    finally:
        c.close()


def read_all(bootstrap: str, tps: list[tuple[str, int]], isolation: str, settle_s: float = 2.0,
             timeout_s: float = 60.0, expect: int | None = None) -> dict[tuple[str, int], list[bytes]]:
    """Every non-control record of ``tps`` from offset 0, with ``isolation.level`` = ``isolation``.

    Reads until ``expect`` records arrived (if given) and then ``settle_s`` more seconds of
    silence, so that records that must NOT appear get a chance to show up.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txn-reader-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "enable.partition.eof": False, "fetch.wait.max.ms": 100})
    out: dict[tuple[str, int], list[bytes]] = {tp: [] for tp in tps}
    try:
        c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in tps])
        deadline = time.monotonic() + timeout_s
        # the first fetch (connect, metadata, offsets) can take a second: silence before it proves nothing
        quiet_since = time.monotonic() + 1.5
        n = 0
        while time.monotonic() < deadline:
            msgs = c.consume(500, 0.2)
            for m in msgs:
                if m.error():
                    raise AssertionError(f"consumer error: {m.error()}")
                out[(str(m.topic()), int(m.partition() or 0))].append(m.value() or b"")
                n += 1
            if msgs:
                quiet_since = time.monotonic()
            elif (expect is None or n >= expect) and time.monotonic() - quiet_since >= settle_s:
                break
        return out
    finally:
        c.close()


def merge(*parts: dict[tuple[str, int], list[bytes]]) -> dict[tuple[str, int], list[bytes]]:
    out: dict[tuple[str, int], list[bytes]] = {}
    for d in parts:
        for tp, vs in d.items():
            out.setdefault(tp, []).extend(vs)
    return out


def assert_same(got: dict[Any, list[bytes]], want: dict[Any, list[bytes]], what: str) -> None:
    for tp in sorted(set(got) | set(want)):
        g, w = got.get(tp, []), want.get(tp, [])
        assert g == w, f"{what}: {tp}: got {len(g)} records, want {len(w)}; first diff " \
                       f"{next(((i, a, b) for i, (a, b) in enumerate(zip(g, w, strict=False)) if a != b), None)}"


def wait_until(pred: Any, timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return bool(pred())


def ctp_round(bootstrap: str, client: str, tmp: Path, n_in: int = 200, command: list[str] | None = None) -> None:
    """Exactly once through a SIGKILL: run the application, kill it after a quarter of the input,
    run it again to the end; the committed output must hold every input exactly once.

    ``command`` is the application's command line before ``BOOTSTRAP INPUT OUTPUT GROUP TID IDLE``
    (default: tests/txn/ctp_app.py with ``client``)."""
    create_topics(bootstrap, ["ctp-in", "ctp-out"], 3)
    from confluent_kafka import Producer

    inp = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    values = [b"m%04d" % i for i in range(n_in)]
    for i, v in enumerate(values):
        inp.produce("ctp-in", value=v, partition=i % 3)
    assert inp.flush(30) == 0
    prefix = command if command is not None else [sys.executable, str(CTP_APP), client]
    args = [*prefix, bootstrap, "ctp-in", "ctp-out", "ctp-group", f"ctp-{client}"]
    log = tmp / "ctp.log"
    # first run: SIGKILL after a few committed transactions, likely in the middle of one
    with open(log, "wb") as f:
        app = subprocess.Popen(args + ["20"], stdout=subprocess.PIPE, stderr=f)
        assert app.stdout is not None
        try:
            seen = 0
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                line = app.stdout.readline()
                if not line:
                    break
                if line.startswith(b"committed"):
                    seen = int(line.split()[1])
                    if seen >= n_in // 4:
                        break
            assert seen >= n_in // 4, f"app did not make progress; log:\n{log.read_text(errors='replace')}"
        finally:
            app.kill()
            app.wait(10)
    # second run: finishes the input, exits when idle
    with open(log, "ab") as f:
        rc = subprocess.run(args + ["8"], stdout=subprocess.DEVNULL, stderr=f, timeout=240).returncode
    assert rc == 0, log.read_text(errors="replace")
    out = read_all(bootstrap, [("ctp-out", p) for p in range(3)], "read_committed", expect=n_in, timeout_s=60)
    got = sorted(v for vs in out.values() for v in vs)
    assert got == sorted(b"out:" + v for v in values), \
        f"{len(got)} outputs for {n_in} inputs; duplicates: {len(got) - len(set(got))}"


