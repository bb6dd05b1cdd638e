"""The ``samsa`` command: ``samsa broker`` starts a broker; the other verbs are operator tools.

``samsa broker [--config server.properties] [--override key=value ...]`` mirrors
``kafka-server-start.sh config/server.properties --override key=value``. With no arguments it
serves 127.0.0.1:9092 with data in ./samsa-data, no other service needed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
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
    from .config.properties import BrokerConfig  # noqa: PLC0415
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

    malloc_tuning.tune(bool(config["malloc.tuning.enable"]))  # before the first large buffers
    broker = Broker(config)
    from .cluster.zk.client import BrokerIdInUse, ZooKeeperUnavailable  # noqa: PLC0415

    try:
        asyncio.run(broker.serve_forever())
    except (OSError, BrokerIdInUse, ZooKeeperUnavailable) as e:
        logging.getLogger("samsa.server").error("Fatal error during startup: %s", e)
        return 1
    except SecurityConfigError as e:  # a bad certificate, keystore or SASL setting: no traceback
        logging.getLogger("samsa.server").error("Invalid security configuration: %s", e)
        return 1
    return 0


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


def run_schema_registry(args: argparse.Namespace) -> int:
    """``samsa schema-registry``: the broker's registry as its own process, over the Kafka protocol."""
    from .schema_registry import SchemaRegistry, parse_listener, standalone_security  # noqa: PLC0415
    from .schema_registry.store import client_options  # noqa: PLC0415

    logging.basicConfig(level=args.log_level.upper(), format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")
    try:
        _scheme, host, port = parse_listener(args.listener)
        props: dict[str, str] = {}
        if args.command_config:
            for line in Path(args.command_config).read_text().replace("\\\n", "").splitlines():
                line = line.strip()
                if line and line[0] not in "#!" and "=" in line:
                    k, v = line.split("=", 1)
                    props[k.strip()] = v.strip()
        options = client_options(props)
    except (ValueError, OSError) as e:
        print(f"samsa: {e}", file=sys.stderr)
        return 2

    async def serve() -> None:
        sr = SchemaRegistry(host, port, args.bootstrap_server, max_body=args.max_request_bytes,
                            advertised_url=args.advertised_listener, eligible=not args.no_leader_eligibility,
                            replication_factor=args.replication_factor, client_options=options,
                            security=standalone_security(args.bootstrap_server, options))
        await sr.start()
        logging.getLogger("samsa.schema_registry").info(
            "Schema registry listening on %s, storing schemas in _schemas at %s (%s)", sr.advertised_url,
            args.bootstrap_server, "HTTP Basic authentication checked by the cluster's SASL and ACLs"
            if sr.app.security is not None else "no authentication")
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stopping.set)
            except (NotImplementedError, RuntimeError):
                pass
        await stopping.wait()
        await sr.stop()

    try:
        asyncio.run(serve())
    except OSError as e:
        logging.getLogger("samsa.schema_registry").error("Cannot serve the schema registry: %s", e)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="samsa", description="Samsa: a Kafka-compatible broker in Python")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    b = sub.add_parser("broker", help="start a broker (like kafka-server-start.sh)")
    add_broker_arguments(b)
    b.set_defaults(func=run_broker)
    sr = sub.add_parser("schema-registry", help="serve a Schema Registry against any Kafka cluster (like Karapace)")
    add_schema_registry_arguments(sr)
    sr.set_defaults(func=run_schema_registry)
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
