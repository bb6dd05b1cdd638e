#!/usr/bin/env python3
"""Broker CPU of reading one request: the header parse and the body decode, per client frame.

The frames are real requests recorded from librdkafka, kafka-python, aiokafka, the Java client
and Samsa's replica fetcher (``tests/protocol/golden/client_request_frames.json``). For each,
this prints the best of ``--repeat`` timings (microseconds per call) of:

* ``header``: ``protocol.messages.parse_header``;
* ``body``: ``protocol.messages.decode_body`` (the hand-written Produce/Fetch decoders, falling
  back to kafka-python for what they leave);
* ``generic``: ``protocol.messages.decode_generic`` (kafka-python's generated decoder with the
  null-field and bounds checks), what ``decode_body`` cost before the hand-written decoders.

With ``--compare DIR`` the same frames are timed with another checkout's ``protocol`` (its
``parse_header``/``decode_body``), printed first. Each checkout is timed in a subprocess of its
own, the two alternating for ``--rounds`` rounds, and each figure is the best over all rounds, so
that both see the same load. A script, not a test: nothing here asserts a speed; the machine's
load is printed beside the figures.

    python3 bench/request_decode.py
    python3 bench/request_decode.py --compare /tmp/main-copy
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import timeit
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
FRAMES = REPO_ROOT / "tests" / "protocol" / "golden" / "client_request_frames.json"


def measure(code: Path, repeat: int, number: int) -> dict[str, dict[str, float]]:
    """Time ``code``'s protocol package on every frame: {frame: {what: us per call}}."""
    sys.path.insert(0, str(code))  # the checkout to time is chosen at run time
    messages = importlib.import_module("protocol.messages")

    generic = getattr(messages, "decode_generic", None)  # absent before the hand-written decoders
    out: dict[str, dict[str, float]] = {}
    for name, hexed in sorted(json.loads(FRAMES.read_text()).items()):
        frame = bytes.fromhex(hexed)
        header = messages.parse_header(frame)
        calls = {"header": lambda: messages.parse_header(frame),  # noqa: B023
                 "body": lambda: messages.decode_body(header, frame)}  # noqa: B023
        if generic is not None:
            calls["generic"] = lambda: generic(header, frame)  # noqa: B023
        out[name] = {what: min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6
                     for what, fn in calls.items()}
    return out


def run(code: Path, repeat: int, number: int) -> dict[str, dict[str, float]]:
    proc = subprocess.run([sys.executable, __file__, "--code", str(code), "--repeat", str(repeat),
                           "--number", str(number)], check=True, capture_output=True, text=True)
    result: dict[str, dict[str, float]] = json.loads(proc.stdout)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare", type=Path, help="another checkout, timed alternately with this one")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--number", type=int, default=20000)
    ap.add_argument("--code", type=Path, help=argparse.SUPPRESS)  # a subprocess: time this, print JSON
    args = ap.parse_args()
    if args.code is not None:
        print(json.dumps(measure(args.code, args.repeat, args.number)))
        return
    codes = ([args.compare.resolve()] if args.compare else []) + [REPO_ROOT]
    best: dict[Path, dict[str, dict[str, float]]] = {c: {} for c in codes}
    loads = []
    for _ in range(args.rounds):
        for code in codes:
            loads.append(os.getloadavg()[0])
            for name, row in run(code, args.repeat, args.number).items():
                mins = best[code].setdefault(name, row)
                for what, us in row.items():
                    mins[what] = min(mins[what], us)
    print(f"# best of {args.rounds} rounds x {args.repeat} x {args.number} calls, us per call; "
          f"load {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores")
    for code in codes:
        print(f"# {code}")
        for name, row in best[code].items():
            print(f"{name:36} " + "  ".join(f"{what} {us:5.2f}" for what, us in row.items()))


if __name__ == "__main__":
    main()
