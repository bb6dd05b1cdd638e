"""``samsa dump-log``: print what is inside segment files (like kafka-dump-log.sh).

Unlike every other ``samsa`` command this one reads files, not the network: it is the tool
for looking at a partition directory when the broker is down or suspected of writing
something wrong. It never modifies a file.

* ``NNN.log``: one line per batch (base/last offset, count, producer id/epoch, sequences,
  transactional/control flags, timestamps, position, size, codec, CRC and whether it
  checks out); ``--print-data-log`` (or ``--deep-iteration``) adds one line per record
  (offset, timestamp, key/value sizes, header keys, and key/payload with
  ``--print-data-log``); control records show ``endTxnMarker: COMMIT|ABORT``.
  ``--offsets-decoder`` / ``--transaction-log-decoder`` decode ``__consumer_offsets`` and
  ``__transaction_state`` records. Bytes after the last whole batch are reported.
* ``NNN.snapshot``: the producer state snapshot (producer id, epoch, coordinator epoch,
  open transaction's first offset, last batch's sequences and offset).
* ``NNN.index``: ``offset: O position: P`` entries; ``NNN.timeindex``: ``timestamp: T
  offset: O``. With ``--index-sanity-check`` / ``--verify-index-only`` each entry is
  checked against the ``.log`` beside it (offsets and positions strictly increasing, each
  position a batch boundary whose last offset is the entry's offset).

File formats are Kafka's (see ``log/segment.py`` and ``log/index.py``). ``--files``
takes a comma-separated list of files or partition directories.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import crc32c

from groupcoord import records as gr
from groupcoord.consumer import records as cr
from protocol.records import (
    COMPRESSION_NAMES,
    COMPRESSION_NONE,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    crc_ok,
    decompress,
    read_header,
)
from protocol.varint import read_varint
from txn import transaction_log as tl

from ._common import JSON, Subparsers, ToolError, add_output, run

ATTR_DELETE_HORIZON = 0x40


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser("dump-log", help="Print the batches, records and index entries of segment "
                              "files (like kafka-dump-log.sh).",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", required=True, help="Comma separated segment files (.log, .index, .timeindex, .snapshot) "
                   "or partition directories.")
    p.add_argument("--print-data-log", action="store_true", help="Print each record with its key and payload.")
    p.add_argument("--deep-iteration", action="store_true", help="Print each record (without payloads).")
    p.add_argument("--index-sanity-check", action="store_true", help="Check index entries against the log.")
    p.add_argument("--verify-index-only", action="store_true", help="Only report index problems.")
    p.add_argument("--max-bytes", type=int, default=None, help="Read at most this many bytes of each .log.")
    p.add_argument("--offsets-decoder", action="store_true",
                   help="Decode __consumer_offsets records (implies --print-data-log).")
    p.add_argument("--transaction-log-decoder", action="store_true",
                   help="Decode __transaction_state records (implies --print-data-log).")
    add_output(p)
    p.set_defaults(func=run(main))


# --- record decoding (magic v2) ------------------------------------------------------------

def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    try:
        return read_varint(buf, pos)
    except IndexError:
        raise ValueError("truncated varint") from None

def _bytes_field(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = _varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise ValueError("field overruns record")
    return buf[pos:pos + n], pos + n


def iter_records(batch: bytes, h: BatchHeader) -> Iterator[dict[str, JSON]]:
    """The records of one whole batch (``batch`` starts at its base_offset field)."""
    body = batch[HEADER_SIZE:h.size]
    raw = bytes(body) if h.compression == COMPRESSION_NONE else decompress(h.compression, body)
    pos, end = 0, len(raw)
    for i in range(h.records_count):
        if pos >= end:
            raise ValueError(f"batch says {h.records_count} records but holds {i}")
        length, pos = _varint(raw, pos)
        rec_end = pos + length
        attrs = raw[pos]
        p = pos + 1
        ts_delta, p = _varint(raw, p)
        off_delta, p = _varint(raw, p)
        key, p = _bytes_field(raw, p)
        value, p = _bytes_field(raw, p)
        nh, p = _varint(raw, p)
        headers = []
        for _ in range(nh):
            hk, p = _bytes_field(raw, p)
            hv, p = _bytes_field(raw, p)
            headers.append(((hk or b"").decode("utf-8", "replace"), hv))
        if p != rec_end:
            raise ValueError(f"record at offset delta {off_delta} has {rec_end - p} stray bytes")
        ts = h.max_timestamp if h.timestamp_type == 1 else h.base_timestamp + ts_delta
        yield {"offset": h.base_offset + off_delta, "timestamp": ts, "attributes": attrs,
               "key": key, "value": value, "headers": headers,
               "sequence": -1 if h.base_sequence < 0 else (h.base_sequence + off_delta) & 0x7FFFFFFF}
        pos = rec_end


def _text(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", errors="backslashreplace")


def control_info(key: bytes | None, value: bytes | None) -> dict[str, JSON]:
    """Control record: key (version int16, type int16: 0 ABORT, 1 COMMIT); value (version, coordinator epoch)."""
    info: dict[str, JSON] = {}
    if key is not None and len(key) >= 4:
        _, ctype = struct.unpack_from(">hh", key)
        info["endTxnMarker"] = {0: "ABORT", 1: "COMMIT"}.get(ctype, f"UNKNOWN({ctype})")
    if value is not None and len(value) >= 6:
        _, epoch = struct.unpack_from(">hi", value)
        info["coordinatorEpoch"] = epoch
    return info


def _decode_offsets(key: bytes | None, value: bytes | None) -> tuple[JSON, JSON]:
    k = gr.decode_key(key) if key is not None else None
    if k is None and key is not None:
        # KIP-848 consumer-group records (key versions 3-8).
        ck = cr.decode_consumer_key(key)
        if ck is not None:
            return _plain(ck), cr.value_to_plain(ck.type, value) if value is not None else None
    v: object = None
    if value is not None and k is not None:
        cls = gr.OffsetCommitValue if isinstance(k, gr.OffsetCommitKey) else gr.GroupMetadataValue
        decode = getattr(cls, "decode", None)
        v = decode(value) if decode else value.hex()
    return _plain(k), _plain(v) if value is not None else None


def _decode_txn(key: bytes | None, value: bytes | None) -> tuple[JSON, JSON]:
    k = tl.decode_key(key) if key is not None else None
    v = _plain(tl.decode_value(value)) if value is not None else None
    return k, v


def _plain(obj: object) -> JSON:
    """A decoded record (dataclasses, enums, bytes, containers) as JSON for printing."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_plain(x) for x in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted(_plain(x) for x in obj)
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (bytes, bytearray)):
        return _text(bytes(obj))
    if hasattr(obj, "name") and hasattr(obj, "value") and not isinstance(obj, (str, int)):
        return obj.name  # enums
    return obj


# --- files ---------------------------------------------------------------------------------

def batch_doc(h: BatchHeader, valid: bool) -> dict[str, JSON]:
    return {
        "baseOffset": h.base_offset, "lastOffset": h.last_offset, "count": h.records_count,
        "baseSequence": h.base_sequence, "lastSequence": h.last_sequence, "producerId": h.producer_id,
        "producerEpoch": h.producer_epoch, "partitionLeaderEpoch": h.partition_leader_epoch,
        "isTransactional": h.is_transactional, "isControl": h.is_control,
        "deleteHorizonMs": h.base_timestamp if h.attributes & ATTR_DELETE_HORIZON else None,
        "position": h.position, "timestampType": "LogAppendTime" if h.timestamp_type == 1 else "CreateTime",
        "baseTimestamp": h.base_timestamp, "maxTimestamp": h.max_timestamp, "size": h.size, "magic": h.magic,
        "compresscodec": COMPRESSION_NAMES.get(h.compression, str(h.compression)), "crc": h.crc, "isvalid": valid,
    }


def dump_log_file(path: Path, args: argparse.Namespace) -> dict[str, JSON]:
    data = path.read_bytes()
    limit = len(data) if args.max_bytes is None else min(len(data), args.max_bytes)
    deep = args.deep_iteration or args.print_data_log or args.offsets_decoder or args.transaction_log_decoder
    payloads = args.print_data_log or args.offsets_decoder or args.transaction_log_decoder
    batches: list[dict[str, JSON]] = []
    problems: list[str] = []
    pos = 0
    while pos + LOG_OVERHEAD <= limit:
        if pos + HEADER_SIZE > len(data):
            break
        h = read_header(data, pos)
        if h.magic != MAGIC_V2 or h.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + h.size > len(data):
            break
        valid = crc_ok(data, h)
        doc = batch_doc(h, valid)
        if not valid:
            problems.append(f"batch at position {pos} (offset {h.base_offset}) fails its CRC check")
        if deep:
            recs = []
            try:
                for r in iter_records(data[pos:pos + h.size], h):
                    rd: dict[str, JSON] = {"offset": r["offset"], "timestamp": r["timestamp"],
                                          "keySize": -1 if r["key"] is None else len(r["key"]),
                                          "valueSize": -1 if r["value"] is None else len(r["value"]),
                                          "sequence": r["sequence"], "headerKeys": [k for k, _ in r["headers"]]}
                    if h.is_control:
                        rd.update(control_info(r["key"], r["value"]))
                    elif payloads:
                        if args.offsets_decoder:
                            rd["key"], rd["payload"] = _decode_offsets(r["key"], r["value"])
                        elif args.transaction_log_decoder:
                            rd["key"], rd["payload"] = _decode_txn(r["key"], r["value"])
                        else:
                            rd["key"], rd["payload"] = _text(r["key"]), _text(r["value"])
                            if r["headers"]:
                                rd["headers"] = {k: _text(v) for k, v in r["headers"]}
                    recs.append(rd)
            except Exception as e:
                problems.append(f"batch at position {pos}: cannot decode records: {e}")
            doc["records"] = recs
        batches.append(doc)
        pos += h.size
    trailing = len(data) - pos if args.max_bytes is None or pos < limit else 0
    if trailing > 0 and args.max_bytes is None:
        problems.append(f"Found {trailing} invalid bytes at the end of {path.name}")
    base = _base_offset(path)
    return {"file": str(path), "type": "log", "logStartingOffset": base, "batches": batches,
            "bytesRead": pos, "problems": problems}


def _base_offset(path: Path) -> int | None:
    try:
        return int(path.name.split(".")[0])
    except ValueError:
        return None


def _log_batches(log_path: Path) -> dict[int, BatchHeader]:
    """Batch position -> header, for index checks."""
    out: dict[int, BatchHeader] = {}
    if not log_path.exists():
        return out
    data = log_path.read_bytes()
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        h = read_header(data, pos)
        if h.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + h.size > len(data):
            break
        out[pos] = h
        pos += h.size
    return out


def dump_index_file(path: Path, args: argparse.Namespace) -> dict[str, JSON]:
    data = path.read_bytes()
    base = _base_offset(path) or 0
    problems: list[str] = []
    entries: list[dict[str, int]] = []
    if len(data) % 8:
        problems.append(f"{path.name}: size {len(data)} is not a multiple of 8")
    for i in range(len(data) // 8):
        rel, position = struct.unpack_from(">ii", data, i * 8)
        entries.append({"offset": base + rel, "position": position})
    check = args.index_sanity_check or args.verify_index_only
    if check:
        batches = _log_batches(path.with_suffix(".log"))
        prev: dict[str, int] | None = None
        for e in entries:
            if prev and (e["offset"] <= prev["offset"] or e["position"] <= prev["position"]):
                problems.append(f"Index offset: {e['offset']} position: {e['position']} is not after "
                                f"offset: {prev['offset']} position: {prev['position']}")
            h = batches.get(e["position"])
            if h is None:
                problems.append(f"Index offset: {e['offset']}, position {e['position']} is not a batch boundary")
            elif h.last_offset != e["offset"]:
                problems.append(f"Index offset: {e['offset']}, log offset: {h.last_offset}")
            prev = e
    return {"file": str(path), "type": "index", "entries": entries, "problems": problems}


def dump_time_index_file(path: Path, args: argparse.Namespace) -> dict[str, JSON]:
    data = path.read_bytes()
    base = _base_offset(path) or 0
    problems: list[str] = []
    entries: list[dict[str, int]] = []
    if len(data) % 12:
        problems.append(f"{path.name}: size {len(data)} is not a multiple of 12")
    for i in range(len(data) // 12):
        ts, rel = struct.unpack_from(">qi", data, i * 12)
        entries.append({"timestamp": ts, "offset": base + rel})
    if args.index_sanity_check or args.verify_index_only:
        offsets: set[int] = set()
        for h in _log_batches(path.with_suffix(".log")).values():
            offsets.update(range(h.base_offset, h.last_offset + 1))
        prev = None
        for e in entries:
            if prev and (e["timestamp"] <= prev["timestamp"] or e["offset"] < prev["offset"]):
                problems.append(f"Found timestamp mis-match: timestamp: {e['timestamp']} offset: {e['offset']} "
                                f"after timestamp: {prev['timestamp']} offset: {prev['offset']}")
            if offsets and e["offset"] not in offsets:
                problems.append(f"Time index offset {e['offset']} is not in the log")
            prev = e
    return {"file": str(path), "type": "timeindex", "entries": entries, "problems": problems}


def dump_snapshot_file(path: Path, args: argparse.Namespace) -> dict[str, JSON]:
    """Producer state snapshot (format documented in ``log/producer_state.py``)."""
    data = path.read_bytes()
    problems: list[str] = []
    producers: list[dict[str, JSON]] = []
    doc: dict[str, JSON] = {"file": str(path), "type": "snapshot", "producers": producers, "problems": problems}
    try:
        version, crc = struct.unpack_from(">hI", data, 0)
        doc["version"] = version
        if version != 1:
            problems.append(f"unknown snapshot version {version}")
            return doc
        if crc32c.crc32c(data[6:]) != crc:
            problems.append("snapshot CRC mismatch")
        offset, count = struct.unpack_from(">qi", data, 6)
        doc["offset"] = offset
        pos = 18
        for _ in range(count):
            pid, epoch, coord_epoch, last_ts, txn_first, n = struct.unpack_from(">qhiqqb", data, pos)
            pos += 31
            batches = []
            for _ in range(n):
                last_seq, last_off, delta, ts = struct.unpack_from(">iqiq", data, pos)
                pos += 24
                batches.append({"firstSequence": (last_seq - delta) & 0x7FFFFFFF, "lastSequence": last_seq,
                                "lastOffset": last_off, "offsetDelta": delta, "timestamp": ts})
            producers.append({"producerId": pid, "producerEpoch": epoch, "coordinatorEpoch": coord_epoch,
                              "currentTxnFirstOffset": txn_first if txn_first >= 0 else None,
                              "lastTimestamp": last_ts, "batches": batches})
        if pos != len(data):
            problems.append(f"{len(data) - pos} trailing bytes")
    except struct.error as e:
        problems.append(f"truncated snapshot: {e}")
    return doc


def _expand(files: str) -> list[Path]:
    out: list[Path] = []
    for f in filter(None, (s.strip() for s in files.split(","))):
        p = Path(f)
        if p.is_dir():
            out.extend(sorted(q for q in p.iterdir() if q.suffix in (".log", ".index", ".timeindex", ".snapshot")))
        elif p.exists():
            out.append(p)
        else:
            raise ToolError(f"{f}: no such file or directory")
    return out


def _print_log(doc: dict[str, JSON], args: argparse.Namespace, out: TextIO) -> None:
    print(f"Log starting offset: {doc['logStartingOffset']}", file=out)
    for b in doc["batches"]:
        horizon = "OptionalLong.empty" if b["deleteHorizonMs"] is None else f"OptionalLong[{b['deleteHorizonMs']}]"
        print(f"baseOffset: {b['baseOffset']} lastOffset: {b['lastOffset']} count: {b['count']} "
              f"baseSequence: {b['baseSequence']} lastSequence: {b['lastSequence']} producerId: {b['producerId']} "
              f"producerEpoch: {b['producerEpoch']} partitionLeaderEpoch: {b['partitionLeaderEpoch']} "
              f"isTransactional: {str(b['isTransactional']).lower()} isControl: {str(b['isControl']).lower()} "
              f"deleteHorizonMs: {horizon} position: {b['position']} {b['timestampType']}: {b['maxTimestamp']} "
              f"size: {b['size']} magic: {b['magic']} compresscodec: {b['compresscodec']} crc: {b['crc']} "
              f"isvalid: {str(b['isvalid']).lower()}", file=out)
        for r in b.get("records", ()):
            line = (f"| offset: {r['offset']} {b['timestampType']}: {r['timestamp']} keySize: {r['keySize']} "
                    f"valueSize: {r['valueSize']} sequence: {r['sequence']} headerKeys: [{', '.join(r['headerKeys'])}]")
            if "endTxnMarker" in r:
                line += f" endTxnMarker: {r['endTxnMarker']} coordinatorEpoch: {r.get('coordinatorEpoch')}"
            elif "payload" in r or "key" in r:
                key, payload = r.get("key"), r.get("payload")
                key = key if isinstance(key, str) or key is None else json.dumps(key, default=str)
                payload = payload if isinstance(payload, str) or payload is None else json.dumps(payload, default=str)
                line += f" key: {key} payload: {payload}"
            print(line, file=out)


def main(args: argparse.Namespace) -> int | None:
    out = sys.stdout
    docs = []
    named = {Path(f.strip()) for f in str(args.files).split(",") if f.strip()}
    for path in _expand(args.files):
        try:
            if path.suffix == ".log":
                if args.verify_index_only:
                    continue
                doc = dump_log_file(path, args)
            elif path.suffix == ".index":
                doc = dump_index_file(path, args)
            elif path.suffix == ".timeindex":
                doc = dump_time_index_file(path, args)
            elif path.suffix == ".snapshot":
                if args.verify_index_only:
                    continue
                doc = dump_snapshot_file(path, args)
            else:
                doc = None
        except FileNotFoundError:
            if path in named:
                raise
            # found by listing a live partition directory, then deleted by the broker (the cleaner
            # swapped or retention removed its segment): nothing to dump
            continue
        if doc is None:
            doc = {"file": str(path), "type": "unknown", "problems": [f"{path.name}: not a segment file "
                                                                       "(.log, .index, .timeindex)"]}
        docs.append(doc)
        if args.json:
            continue
        print(f"Dumping {path}", file=out)
        if doc["type"] == "log":
            _print_log(doc, args, out)
        elif doc["type"] == "index" and not args.verify_index_only:
            for e in doc["entries"]:
                print(f"offset: {e['offset']} position: {e['position']}", file=out)
        elif doc["type"] == "timeindex" and not args.verify_index_only:
            for e in doc["entries"]:
                print(f"timestamp: {e['timestamp']} offset: {e['offset']}", file=out)
        elif doc["type"] == "snapshot":
            for pr in doc["producers"]:
                txn = pr["currentTxnFirstOffset"]
                last = pr["batches"][-1] if pr["batches"] else {}
                print(f"producerId: {pr['producerId']} producerEpoch: {pr['producerEpoch']} "
                      f"coordinatorEpoch: {pr['coordinatorEpoch']} currentTxnFirstOffset: "
                      f"{'OptionalLong.empty' if txn is None else f'OptionalLong[{txn}]'} "
                      f"lastTimestamp: {pr['lastTimestamp']} firstSequence: {last.get('firstSequence')} "
                      f"lastSequence: {last.get('lastSequence')} lastOffset: {last.get('lastOffset')} "
                      f"offsetDelta: {last.get('offsetDelta')} timestamp: {last.get('timestamp')}", file=out)
        for problem in doc["problems"]:
            print(problem, file=out)
    if args.json:
        json.dump(docs, out, indent=2, default=str)
        out.write("\n")
    return 1 if any(d["problems"] for d in docs) else 0
