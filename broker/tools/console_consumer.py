"""``samsa console-consumer``: print records of a topic to stdout.

Mirrors ``kafka-console-consumer.sh``: ``--topic``, ``--from-beginning``,
``--max-messages N``, ``--timeout-ms T`` (exit after T ms without a record), ``--group G``
(join and commit as that group; without it the partitions are assigned directly and
nothing is committed), ``--partition P --offset earliest|latest|N``, ``--isolation-level``,
and the DefaultMessageFormatter properties (``--property k=v``): ``print.timestamp``,
``print.partition``, ``print.offset``, ``print.headers``, ``print.key``, ``print.value``
(default true), ``key.separator`` (TAB), ``headers.separator`` (``,``),
``line.separator`` (newline), ``null.literal`` (``null``). ``--json`` prints one object
per record. "Processed a total of N messages" goes to stderr at the end, as Kafka does.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time

from kafka import KafkaConsumer
from kafka.consumer.fetcher import ConsumerRecord
from kafka.structs import OffsetAndMetadata, TopicPartition

from ._common import (
    CLIENT_ID,
    JSON,
    Subparsers,
    ToolError,
    add_bootstrap,
    add_output,
    bootstrap_list,
    parse_properties,
    run,
    security_kwargs,
)


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("console-consumer", help="Print records of a topic "
                              "(like kafka-console-consumer.sh).",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--from-beginning", action="store_true",
                   help="Start at the log start offset when there is no committed offset.")
    p.add_argument("--max-messages", type=int, help="Exit after this many records.")
    p.add_argument("--timeout-ms", type=int, help="Exit when no record arrives for this long.")
    p.add_argument("--group", help="Consumer group to join (offsets are committed).")
    p.add_argument("--partition", type=int, help="Consume only this partition (no group).")
    p.add_argument("--offset", default=None,
                   help="With --partition: earliest, latest or an offset (default latest).")
    p.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"],
                   default="read_uncommitted")
    p.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="Formatter property: print.key, print.timestamp, print.partition, print.offset, "
                   "print.headers, print.value, key.separator, headers.separator, line.separator, null.literal.")
    p.add_argument("--consumer-property", action="append", metavar="KEY=VALUE",
                   help="KafkaConsumer setting in Kafka's spelling, e.g. fetch.max.bytes=1048576.")
    add_output(p)
    p.set_defaults(func=run(main))


def _unescape(s: str) -> str:
    return s.encode().decode("unicode_escape") if "\\" in s else s


class Formatter:
    """Kafka's DefaultMessageFormatter, field order: timestamp, partition, offset, headers, key, value."""

    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str, default: bool = False) -> bool:
            return props.get(name, str(default)).lower() == "true"

        self.ts, self.part, self.off = flag("print.timestamp"), flag("print.partition"), flag("print.offset")
        self.hdrs, self.key, self.value = flag("print.headers"), flag("print.key"), flag("print.value", True)
        self.sep = _unescape(props.get("key.separator", "\t"))
        self.hsep = _unescape(props.get("headers.separator", ","))
        self.line_sep = _unescape(props.get("line.separator", "\n"))
        self.null = props.get("null.literal", "null")

    def _b(self, b: bytes | None) -> str:
        return self.null if b is None else b.decode("utf-8", errors="backslashreplace")

    def format(self, r: ConsumerRecord) -> str:
        fields = []
        if self.ts:
            kind = "LogAppendTime" if r.timestamp_type == 1 else "CreateTime"
            fields.append(f"{kind}:{r.timestamp}" if r.timestamp >= 0 else "NO_TIMESTAMP")
        if self.part:
            fields.append(f"Partition:{r.partition}")
        if self.off:
            fields.append(f"Offset:{r.offset}")
        if self.hdrs:
            fields.append(self.hsep.join(f"{k}:{self._b(v)}" for k, v in r.headers) if r.headers else "NO_HEADERS")
        if self.key:
            fields.append(self._b(r.key))
        if self.value:
            fields.append(self._b(r.value))
        return self.sep.join(fields) + self.line_sep


def _text(b: bytes | None) -> JSON:
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(b).decode()}


def record_json(r: ConsumerRecord) -> str:
    return json.dumps({"topic": r.topic, "partition": r.partition, "offset": r.offset,
                       "timestamp": r.timestamp,
                       "timestamp_type": "LogAppendTime" if r.timestamp_type == 1 else "CreateTime",
                       "key": _text(r.key), "value": _text(r.value),
                       "headers": [[k, _text(v)] for k, v in (r.headers or [])]})


def _consumer_config(args: argparse.Namespace) -> dict[str, JSON]:
    conf: dict[str, JSON] = {
        "bootstrap_servers": bootstrap_list(args), "client_id": CLIENT_ID + "-consumer",
        "group_id": args.group, "enable_auto_commit": False,  # we commit what was printed
        "auto_offset_reset": "earliest" if args.from_beginning else "latest",
        "isolation_level": args.isolation_level, "request_timeout_ms": max(args.request_timeout_ms, 30001),
    }
    conf.update(security_kwargs(args))
    for k, v in parse_properties(args.consumer_property).items():
        conf[k.replace(".", "_")] = int(v) if v.lstrip("-").isdigit() else v
    return conf


def main(args: argparse.Namespace) -> int | None:
    if args.partition is None and args.offset is not None:
        raise ToolError("--offset needs --partition")
    if args.partition is not None and args.group:
        raise ToolError("--partition cannot be combined with --group")
    fmt = Formatter(parse_properties(args.property))
    try:
        consumer = KafkaConsumer(**_consumer_config(args))
    except Exception as e:
        raise ToolError(f"cannot start consumer against {args.bootstrap_server}: {e}") from e
    count = 0
    out = sys.stdout
    printed: dict[TopicPartition, int] = {}  # partition -> offset after the last record printed
    last_commit = time.monotonic()

    def commit() -> None:
        if args.group and printed:
            consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in printed.items()})
    try:
        if args.group:
            # Metadata first, so the first JoinGroup already knows the partitions (kafka-python
            # otherwise joins twice), and long polls: kafka-python can lose a SyncGroup answer
            # that arrives after a short poll() gave up, and then never fetches.
            deadline = time.monotonic() + 10
            while not consumer.partitions_for_topic(args.topic) and time.monotonic() < deadline:
                consumer.topics()
                time.sleep(0.2)
            consumer.subscribe([args.topic])
        else:
            parts = consumer.partitions_for_topic(args.topic)
            deadline = time.monotonic() + 10
            while not parts and time.monotonic() < deadline:
                time.sleep(0.2)
                consumer.topics()  # refresh metadata
                parts = consumer.partitions_for_topic(args.topic)
            if not parts:
                raise ToolError(f"topic {args.topic} not found")
            if args.partition is not None:
                if args.partition not in parts:
                    raise ToolError(f"topic {args.topic} has no partition {args.partition}")
                parts = {args.partition}
            tps = [TopicPartition(args.topic, p) for p in sorted(parts)]
            consumer.assign(tps)
            where = args.offset or ("earliest" if args.from_beginning else "latest")
            if where == "earliest":
                consumer.seek_to_beginning(*tps)
            elif where == "latest":
                consumer.seek_to_end(*tps)
            else:
                try:
                    off = int(where)
                except ValueError as e:
                    raise ToolError(f"Invalid --offset {where!r}") from e
                for tp in tps:
                    consumer.seek(tp, off)
        last = time.monotonic()
        while args.max_messages is None or count < args.max_messages:
            batches = consumer.poll(timeout_ms=1000 if args.group else 200)
            got = False
            for tp, records in batches.items():
                for r in records:
                    got = True
                    printed[tp] = r.offset + 1
                    out.write(record_json(r) + "\n" if args.json else fmt.format(r))
                    count += 1
                    if args.max_messages is not None and count >= args.max_messages:
                        break
                if args.max_messages is not None and count >= args.max_messages:
                    break
            out.flush()
            now = time.monotonic()
            if got:
                last = now
            if args.group and now - last_commit >= 5:
                commit()
                last_commit = now
            elif args.timeout_ms is not None and (now - last) * 1000 >= args.timeout_ms:
                break
        if args.group:
            try:
                commit()
            except Exception as e:  # a commit after a rebalance may fail; the records were printed
                print(f"Warning: final commit failed: {e}", file=sys.stderr)
    finally:
        consumer.close(autocommit=False)
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0
