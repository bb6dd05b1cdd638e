"""``samsa get-offsets``: offsets of partitions for a time spec (like kafka-get-offsets.sh).

``--time`` is ``latest``/``-1`` (the log end offset, default), ``earliest``/``-2`` (the log
start offset, which retention and DeleteRecords move on), ``max-timestamp``/``-3``
(KIP-734: the record with the largest timestamp), or a timestamp in ms (the first offset
whose timestamp is at or after it; empty when there is none). Partitions are chosen with
``--topic`` (a regular expression) and ``--partitions 0,2-4``, or ``--topic-partitions
t:0-2,u`` (Kafka's patterns: ``N``, ``N-M`` with M exclusive, ``N-``, ``-M``). Output is Kafka's ``topic:partition:offset`` lines, or ``--json``. One ListOffsets
request per partition leader.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from kafka.admin import OffsetSpec, OffsetTimestamp
from kafka.protocol.consumer import IsolationLevel
from kafka.structs import TopicPartition

from ._common import (
    Subparsers,
    ToolError,
    add_bootstrap,
    add_output,
    admin_client,
    list_topic_partitions,
    parse_partition_list,
    print_json,
    run,
    topic_matcher,
)

TIME_SPECS = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4, "latest-tiered": -5}
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("get-offsets", help="Offsets of partitions by time (like kafka-get-offsets.sh).",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    p.add_argument("--topic", help="Topic name or regular expression (default: all topics).")
    p.add_argument("--partitions", help="Comma separated partition ids or ranges, e.g. 0,2-4.")
    p.add_argument("--topic-partitions", help="topic:partitions pairs, e.g. t:0-2,u:1,v.")
    p.add_argument("--time", default="latest",
                   help="latest|-1, earliest|-2, max-timestamp|-3, or a timestamp in ms (default latest).")
    p.add_argument("--exclude-internal-topics", action="store_true")
    p.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"],
                   default="read_uncommitted", help="read_committed answers with the last stable offset.")
    add_output(p)
    p.set_defaults(func=run(main))


def parse_time(spec: str) -> int:
    if spec in TIME_SPECS:
        return TIME_SPECS[spec]
    try:
        value = int(spec)
    except ValueError as e:
        raise ToolError(f"Invalid --time {spec!r}: latest, earliest, max-timestamp or a timestamp in ms") from e
    if value < -5:
        raise ToolError(f"Invalid --time {spec!r}")
    return value


def _partition_pattern(spec: str) -> Callable[[int], bool]:
    """kafka-get-offsets' partition pattern: N, N-M (M exclusive), N-, -M, or empty for all."""
    try:
        if not spec:
            return lambda p: True
        if "-" not in spec:
            n = int(spec)
            return lambda p: p == n
        lo_s, hi_s = spec.split("-", 1)
        lo = int(lo_s) if lo_s else 0
        hi = int(hi_s) if hi_s else None
        return lambda p: p >= lo and (hi is None or p < hi)
    except ValueError as e:
        raise ToolError(f"Invalid partition pattern {spec!r} in --topic-partitions") from e


def _selection(args: argparse.Namespace, all_parts: dict[str, list[int]]) -> list[tuple[str, int]]:
    chosen: list[tuple[str, int]] = []
    if args.topic_partitions:
        if args.topic or args.partitions:
            raise ToolError("--topic-partitions excludes --topic and --partitions")
        for item in filter(None, (x.strip() for x in args.topic_partitions.split(","))):
            topic, _, spec = item.partition(":")
            match = topic_matcher(topic or None)
            accept = _partition_pattern(spec)
            for t, ps in all_parts.items():
                if match(t):
                    chosen.extend((t, p) for p in ps if accept(p))
    else:
        match = topic_matcher(args.topic)
        wanted = parse_partition_list(args.partitions) if args.partitions else None
        for t, ps in all_parts.items():
            if match(t):
                chosen.extend((t, p) for p in ps if wanted is None or p in wanted)
    if args.exclude_internal_topics:
        chosen = [(t, p) for t, p in chosen if t not in INTERNAL_TOPICS]
    return sorted(set(chosen))


def main(args: argparse.Namespace) -> int | None:
    when = parse_time(args.time)
    admin = admin_client(args)
    try:
        chosen = _selection(args, list_topic_partitions(admin))
        if not chosen:
            raise ToolError("no partitions match the given --topic/--partitions")
        spec: OffsetSpec | OffsetTimestamp = OffsetSpec(when) if when < 0 else OffsetTimestamp(when)
        level = IsolationLevel.READ_COMMITTED if args.isolation_level == "read_committed" else \
            IsolationLevel.READ_UNCOMMITTED
        res = admin.list_partition_offsets({TopicPartition(t, p): spec for t, p in chosen}, isolation_level=level)
    finally:
        admin.close()
    rows = []
    for t, p in chosen:
        r = res.get(TopicPartition(t, p))
        off = r.offset if r is not None and r.offset >= 0 else None
        ts = r.timestamp if r is not None and r.timestamp is not None and r.timestamp >= 0 else None
        rows.append({"topic": t, "partition": p, "offset": off, "timestamp": ts})
    if args.json:
        print_json(rows)
    else:
        for r in rows:
            print(f"{r['topic']}:{r['partition']}:{'' if r['offset'] is None else r['offset']}")
    return 0
