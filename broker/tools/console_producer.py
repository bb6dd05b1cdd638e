"""``samsa console-producer``: read lines from stdin and produce one record per line.

Mirrors ``kafka-console-producer.sh`` and its LineMessageReader properties
(``--property k=v``):

* ``parse.key=true`` splits each line at ``key.separator`` (default TAB) into key and value;
* ``parse.headers=true`` first splits off headers at ``headers.delimiter`` (default TAB),
  headers being ``k1:v1,k2:v2`` (``headers.separator`` ``,`` and ``headers.key.separator``
  ``:``); a header without a separator has a null value;
* ``null.marker=X`` makes a key/value equal to X null (so ``null.marker=NULL`` and a value of
  ``NULL`` produce a tombstone for compacted topics);
* ``ignore.error=true`` keeps a line without a key separator (key null) instead of failing.

``--compression-codec``, ``--request-required-acks``, ``--sync``, ``--partition`` (pin
every record to one partition) and ``--producer-property`` tune the KafkaProducer. With
``--json`` each acknowledged record is printed as ``{"topic", "partition", "offset"}``.
"""

from __future__ import annotations

import argparse
import json
import sys

from kafka import KafkaProducer
from kafka.producer.future import FutureRecordMetadata

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
    p = subparsers.add_parser("console-producer", help="Produce lines from stdin "
                              "(like kafka-console-producer.sh).",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="Line reader property: parse.key, key.separator, parse.headers, headers.delimiter, "
                   "headers.separator, headers.key.separator, null.marker, ignore.error.")
    p.add_argument("--producer-property", action="append", metavar="KEY=VALUE",
                   help="KafkaProducer setting in Kafka's spelling, e.g. linger.ms=5, enable.idempotence=true.")
    p.add_argument("--compression-codec", nargs="?", const="gzip",
                   choices=["none", "gzip", "snappy", "lz4", "zstd"], default="none")
    p.add_argument("--request-required-acks", default="all", help="acks: 0, 1 or all/-1 (default all).")
    p.add_argument("--partition", type=int, help="Send every record to this partition.")
    p.add_argument("--sync", action="store_true", help="Wait for each record's acknowledgement.")
    p.add_argument("--input-file", help="Read lines from this file instead of stdin.")
    add_output(p)
    p.set_defaults(func=run(main))


class LineReader:
    """Kafka's LineMessageReader: line -> (key, value, headers), all bytes or None."""

    def __init__(self, props: dict[str, str]) -> None:
        self.parse_key = props.get("parse.key", "false").lower() == "true"
        self.key_sep = _unescape(props.get("key.separator", "\t"))
        self.parse_headers = props.get("parse.headers", "false").lower() == "true"
        self.headers_delim = _unescape(props.get("headers.delimiter", "\t"))
        self.headers_sep = _unescape(props.get("headers.separator", ","))
        self.header_key_sep = _unescape(props.get("headers.key.separator", ":"))
        self.null_marker = props.get("null.marker")
        self.ignore_error = props.get("ignore.error", "false").lower() == "true"

    def _bytes(self, s: str | None) -> bytes | None:
        if s is None or (self.null_marker is not None and s == self.null_marker):
            return None
        return s.encode()

    def parse(self, line: str, lineno: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        headers: list[tuple[str, bytes | None]] = []
        rest = line
        if self.parse_headers:
            if self.headers_delim not in rest:
                if not self.ignore_error:
                    raise ToolError(f"line {lineno}: no headers delimiter {self.headers_delim!r} found")
            else:
                raw, rest = rest.split(self.headers_delim, 1)
                for h in filter(None, raw.split(self.headers_sep)):
                    if self.header_key_sep in h:
                        hk, hv = h.split(self.header_key_sep, 1)
                        headers.append((hk, self._bytes(hv)))
                    else:
                        headers.append((h, None))
        key: str | None = None
        if self.parse_key:
            if self.key_sep not in rest:
                if not self.ignore_error:
                    raise ToolError(f"line {lineno}: no key separator {self.key_sep!r} found")
            else:
                key, rest = rest.split(self.key_sep, 1)
        return self._bytes(key), self._bytes(rest), headers


def _unescape(s: str) -> str:
    return s.encode().decode("unicode_escape") if "\\" in s else s


def _producer_config(args: argparse.Namespace) -> dict[str, JSON]:
    acks: str | int = "all" if args.request_required_acks in ("all", "-1") else int(args.request_required_acks)
    conf: dict[str, JSON] = {"bootstrap_servers": bootstrap_list(args), "client_id": CLIENT_ID + "-producer",
                            "acks": acks, "request_timeout_ms": args.request_timeout_ms}
    conf.update(security_kwargs(args))
    if args.compression_codec != "none":
        conf["compression_type"] = args.compression_codec
    for k, v in parse_properties(args.producer_property).items():
        key = k.replace(".", "_")
        conf[key] = int(v) if v.lstrip("-").isdigit() else (v.lower() == "true" if v.lower() in
                                                              ("true", "false") else v)
    return conf


def main(args: argparse.Namespace) -> int | None:
    reader = LineReader(parse_properties(args.property))
    try:
        producer = KafkaProducer(**_producer_config(args))
    except Exception as e:
        raise ToolError(f"cannot start producer against {args.bootstrap_server}: {e}") from e
    src = open(args.input_file) if args.input_file else sys.stdin
    pending: list[FutureRecordMetadata] = []
    failures = 0

    def report(fut: FutureRecordMetadata) -> None:
        nonlocal failures
        try:
            md = fut.get(timeout=args.request_timeout_ms / 1000)
        except Exception as e:
            failures += 1
            print(f"Error when sending message to topic {args.topic}: {type(e).__name__}: {e}", file=sys.stderr)
            return
        if args.json:
            print(json.dumps({"topic": md.topic, "partition": md.partition, "offset": md.offset}), flush=True)

    try:
        for lineno, line in enumerate(src, 1):
            line = line.rstrip("\n").rstrip("\r")
            key, value, headers = reader.parse(line, lineno)
            fut = producer.send(args.topic, key=key, value=value, headers=headers or None,
                                partition=args.partition)
            if args.sync:
                report(fut)
            else:
                pending.append(fut)
                if len(pending) >= 1000:
                    producer.flush()
                    for f in pending:
                        report(f)
                    pending.clear()
        producer.flush()
        for f in pending:
            report(f)
    finally:
        producer.close(timeout=5)
        if src is not sys.stdin:
            src.close()
    return 1 if failures else 0
