"""Reads near the log end start at the batch itself (LogSegment.recent), not at the index entry
before it: every offset still finds its own batch, across a large multi-batch append, a
truncation and a reopen."""

from __future__ import annotations

from pathlib import Path

from log import Log, LogConfig
from log.segment import LogSegment
from tests.log.helpers import build_batch, decode, records


def _check_every_offset(lg: Log, leo: int) -> None:
    for off in range(leo):
        info = lg.read(off, 1)  # one batch: the one holding off
        assert info is not None, off
        got = [o for o, *_ in decode(info.read())]
        assert off in got, (off, got)
    assert lg.read(leo, 1 << 20) is None


def test_tail_reads_find_their_batch(tmp_path: Path) -> None:
    # index.interval.bytes far above the data: without the recent positions every read scans from 0
    cfg = LogConfig(segment_bytes=1 << 20, index_interval_bytes=1 << 16)
    lg = Log.open(tmp_path / "t-0", cfg)
    n = 0
    for i in range(40):  # one- and two-record batches, appended one at a time
        values = [b"v%d" % i] * (1 + i % 2)
        lg.append(records(build_batch(values)))
        n += len(values)
    seg = lg.segments[-1]
    assert len(seg.recent) == LogSegment.RECENT_BATCHES
    _check_every_offset(lg, n)

    # one append of more batches than are remembered: only its newest are, with no gap
    many = [build_batch([b"m%d" % i]) for i in range(LogSegment.RECENT_BATCHES + 5)]
    lg.append(records(*many))
    n += len(many)
    _check_every_offset(lg, n)

    # a truncation forgets them; appends after it are remembered again
    lg.truncate_to(n - 10)
    n -= 10
    assert not seg.recent
    _check_every_offset(lg, n)
    lg.append(records(build_batch([b"a", b"b", b"c"])))
    n += 3
    _check_every_offset(lg, n)
    lg.close()

    reopened = Log.open(tmp_path / "t-0", cfg)
    _check_every_offset(reopened, n)
    reopened.close()
