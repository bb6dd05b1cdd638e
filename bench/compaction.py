"""Log compaction throughput and memory: the cleaner on a log many times larger than its buffer.

Builds a compacted partition with ``Log.append`` (the broker's write path) from real v2
batches (kafka-python's record builder): ``--records`` updates over ``--keys`` keys, in
batches of ``--batch`` records, with the chosen codec. The key set is bigger than the
offset map (``--buffer-kib``, 16 bytes a slot, load factor 0.9), so cleaning takes several
passes, each mapping as many keys as fit and continuing where the last stopped. Then:

1. cleans a copy of the log to the end, untraced: MB/s = bytes the cleaner read / seconds
   (also records/s and the bytes written), and the number of passes;
2. cleans another copy under ``tracemalloc``: the peak of Python heap allocated during
   cleaning (the offset map plus per-batch buffers), which must stay near the map size
   whatever the log size;
3. checks the result: one record per key, the latest value.

    python bench/compaction.py                          # 300k records, 100k keys, 512 KiB map
    python bench/compaction.py --records 1000000 --keys 250000 --codec lz4 --json out.json
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from log.cleaner import CleanerStats, LogCleaner  # noqa: E402
from log.config import LogConfig  # noqa: E402
from log.log import Log  # noqa: E402
from log.offset_map import OffsetMap  # noqa: E402
from protocol.records import COMPRESSION_CODES, iter_headers, validate_batches  # noqa: E402

T0 = 1_700_000_000_000


def config(segment_bytes: int) -> LogConfig:
    return LogConfig.from_properties({"cleanup.policy": "compact", "segment.bytes": str(segment_bytes),
                                      "file.delete.delay.ms": "0"})


def build(dir: Path, records: int, keys: int, per_batch: int, codec: int, value_bytes: int,
          segment_bytes: int, seed: int) -> tuple[int, dict[bytes, bytes]]:
    rng = random.Random(seed)
    log = Log.open(dir, config(segment_bytes))
    latest: dict[bytes, bytes] = {}
    pad = b"x" * max(0, value_bytes - 12)
    n = 0
    while n < records:
        b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
        for i in range(min(per_batch, records - n)):
            k = b"key-%08d" % rng.randrange(keys)
            v = b"%012d" % (n + i) + pad
            b.append(i, timestamp=T0 + n + i, key=k, value=v, headers=[])
            latest[k] = v
        log.append(validate_batches(bytes(b.build()), deep=False))
        n += per_batch
    log.roll()
    size = log.size_bytes
    log.close()
    return size, latest


def clean_to_end(dir: Path, segment_bytes: int, buffer_bytes: int) -> tuple[CleanerStats, float, Log]:
    log = Log.open(dir, config(segment_bytes), recover=False)
    cleaner = LogCleaner(log, buffer_bytes=buffer_bytes)
    total = CleanerStats()
    t0 = time.perf_counter()
    for _ in range(1000):
        total.add(cleaner.clean(T0 + 10**9, force=True))
        if cleaner.first_dirty >= log.segments[-1].base_offset:
            break
    return total, time.perf_counter() - t0, log


def verify(log: Log, latest: dict[bytes, bytes]) -> None:
    from log.cleaner import parse_records

    seen: dict[bytes, bytes] = {}
    for buf in log.read_batch_bytes(0):
        for h in iter_headers(buf):
            for r in parse_records(buf, h):
                assert r.key is not None
                if r.key in seen:
                    raise AssertionError(f"key {r.key!r} appears twice after cleaning")
                seen[r.key] = r.body
    if set(seen) != set(latest):
        raise AssertionError(f"{len(seen)} keys after cleaning, {len(latest)} written")
    for k, body in seen.items():
        if latest[k] not in body:
            raise AssertionError(f"key {k!r} does not hold its latest value")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=200, help="records per batch")
    ap.add_argument("--value-bytes", type=int, default=64)
    ap.add_argument("--codec", default="none", choices=sorted(COMPRESSION_CODES))
    ap.add_argument("--buffer-kib", type=int, default=512, help="offset map size (log.cleaner.dedupe.buffer.size)")
    ap.add_argument("--segment-bytes", type=int, default=1 << 20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()

    buffer_bytes = args.buffer_kib * 1024
    with tempfile.TemporaryDirectory(prefix="samsa-compaction-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        size, latest = build(root / "a" / "bench-0", args.records, args.keys, args.batch,
                             COMPRESSION_CODES[args.codec], args.value_bytes, args.segment_bytes, args.seed)
        build_s = time.perf_counter() - t0
        shutil.copytree(root / "a", root / "b")

        stats, secs, log = clean_to_end(root / "a" / "bench-0", args.segment_bytes, buffer_bytes)
        verify(log, latest)
        after = log.size_bytes
        log.close()

        tracemalloc.start()
        tracemalloc.reset_peak()
        base_mem = tracemalloc.get_traced_memory()[0]
        stats_b, _, log_b = clean_to_end(root / "b" / "bench-0", args.segment_bytes, buffer_bytes)
        peak = tracemalloc.get_traced_memory()[1] - base_mem
        tracemalloc.stop()
        log_b.close()

    omap = OffsetMap(buffer_bytes)
    result = {
        "records": args.records, "keys": args.keys, "live_keys": len(latest), "codec": args.codec,
        "batch": args.batch, "value_bytes": args.value_bytes,
        "log_mb": round(size / 1e6, 2), "log_mb_after": round(after / 1e6, 3),
        "buffer_kib": args.buffer_kib, "map_entries": omap.max_entries,
        "log_to_buffer_ratio": round(size / buffer_bytes, 1),
        "keys_to_map_ratio": round(len(latest) / omap.max_entries, 2),
        "passes": stats.passes, "seconds": round(secs, 2),
        "mb_read": round(stats.bytes_read / 1e6, 2), "mb_written": round(stats.bytes_written / 1e6, 2),
        "mb_per_s": round(stats.bytes_read / 1e6 / secs, 2) if secs else None,
        "records_per_s": round(stats.records_read / secs) if secs else None,
        "log_mb_per_s": round(size / 1e6 / secs, 2) if secs else None,
        "peak_python_heap_mib": round(peak / 2**20, 2),
        "peak_to_buffer_ratio": round(peak / buffer_bytes, 2),
        "build_seconds": round(build_s, 1),
    }
    w = max(len(k) for k in result)
    for k, v in result.items():
        print(f"{k:<{w}}  {v}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
