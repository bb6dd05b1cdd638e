"""The ``samsa`` command: ``samsa broker`` starts a broker; the other verbs are operator tools.

``samsa broker [--config server.properties] [--override key=value ...]`` mirrors
``kafka-server-start.sh config/server.properties --override key=value``. With no arguments it
serves 127.0.0.1:9092 with data in ./samsa-data, no other service needed.

This module only builds the parser: ``samsa broker`` and ``samsa schema-registry`` run in
:mod:`broker.cli.run_broker` and :mod:`broker.cli.run_schema_registry`, imported when chosen
(``RUNNERS`` below), so ``samsa --help`` and the operator tools never load the broker itself.
The tools (broker/tools/) and ``samsa demo`` (spark/cli.py) register their own sub-commands.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from spark.cli import add_demo_subcommands

from ..tools import register as register_tools

# `samsa broker` and `samsa schema-registry`: the module whose ``run(args)`` serves each. Imported by
# name when the command runs (importlib.import_module in ``main``: the CLI's one dynamic import),
# because importing the broker costs ~1 s (`python3 -X importtime -c "import broker.server"`, on
# this machine under load) that `samsa --help` and every operator tool would otherwise pay.
RUNNERS = {"broker": "broker.cli.run_broker", "schema-registry": "broker.cli.run_schema_registry"}


def _parse_override(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    k, v = text.split("=", 1)
    return k.strip(), v.strip()


def add_broker_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", type=Path, help="server.properties file (Kafka property names)")
    p.add_argument("--config", dest="config_opt", type=Path, help="server.properties file")
    p.add_argument("--override", action="append", type=_parse_override, default=[], metavar="KEY=VALUE",
                   help="override a property, e.g. --override log.dirs=/data/samsa")
    p.add_argument("--no-uvloop", action="store_true", help="use the default asyncio event loop")


def add_schema_registry_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", "--bootstrap-servers", dest="bootstrap_server", required=True,
                   metavar="HOST:PORT[,HOST:PORT]", help="the Kafka cluster whose _schemas topic holds the schemas")
    p.add_argument("--listener", default="http://127.0.0.1:8081", help="where to serve (default http://127.0.0.1:8081)")
    p.add_argument("--advertised-listener", default="", help="the URL other registries forward writes to")
    p.add_argument("--replication-factor", type=int, default=3, help="of _schemas when it is created (default 3)")
    p.add_argument("--no-leader-eligibility", action="store_true", help="never become the primary")
    p.add_argument("--max-request-bytes", type=int, default=1048576)
    p.add_argument("--command-config", metavar="FILE",
                   help="Kafka client properties for the registry's own connection: security.protocol, "
                        "sasl.mechanism, sasl.jaas.config, ssl.truststore.location (a PEM CA file)")
    p.add_argument("--log-level", default="INFO")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="samsa", description="Samsa: a Kafka-compatible broker in Python")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    b = sub.add_parser("broker", help="start a broker (like kafka-server-start.sh)")
    add_broker_arguments(b)
    b.set_defaults(runner=RUNNERS["broker"])
    sr = sub.add_parser("schema-registry", help="serve a Schema Registry against any Kafka cluster (like Karapace)")
    add_schema_registry_arguments(sr)
    sr.set_defaults(runner=RUNNERS["schema-registry"])
    register_tools(sub)
    add_demo_subcommands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    runner = getattr(args, "runner", None)
    if runner is not None:
        return int(importlib.import_module(runner).run(args))
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
