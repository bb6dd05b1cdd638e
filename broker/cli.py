"""The ``samsa`` command: ``samsa broker`` starts a broker; the other verbs are operator tools.

``samsa broker [--config server.properties] [--override key=value ...]`` mirrors
``kafka-server-start.sh config/server.properties --override key=value``. With no arguments it
serves 127.0.0.1:9092 with data in ./samsa-data, no other service needed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from protocol.errors import KafkaError


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


def run_broker(args: argparse.Namespace) -> int:
    from .config import BrokerConfig  # noqa: PLC0415
    from .security import SecurityConfigError  # noqa: PLC0415
    from .server import Broker  # noqa: PLC0415

    try:
        config = BrokerConfig.load(args.config_opt or args.config, dict(args.override))
    except KafkaError as e:
        print(f"samsa: invalid configuration: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=str(config["log.level"]).upper(),
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")
    if not args.no_uvloop:
        try:
            import uvloop  # noqa: PLC0415

            uvloop.install()
        except ImportError:
            pass
    from . import malloc_tuning  # noqa: PLC0415

    malloc_tuning.tune()  # before the first large buffers
    broker = Broker(config)
    from .zk.client import BrokerIdInUse, ZooKeeperUnavailable  # noqa: PLC0415

    try:
        asyncio.run(broker.serve_forever())
    except (OSError, BrokerIdInUse, ZooKeeperUnavailable) as e:
        logging.getLogger("samsa.server").error("Fatal error during startup: %s", e)
        return 1
    except SecurityConfigError as e:  # a bad certificate, keystore or SASL setting: no traceback
        logging.getLogger("samsa.server").error("Invalid security configuration: %s", e)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="samsa", description="Samsa: a Kafka-compatible broker in Python")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    b = sub.add_parser("broker", help="start a broker (like kafka-server-start.sh)")
    add_broker_arguments(b)
    b.set_defaults(func=run_broker)
    try:
        from .tools import register  # noqa: PLC0415
    except ImportError:
        pass
    else:
        register(sub)
    try:
        from spark.cli import add_demo_subcommands  # noqa: PLC0415
    except ImportError:
        pass
    else:
        add_demo_subcommands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
