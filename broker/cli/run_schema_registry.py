"""``samsa schema-registry``: the broker's Schema Registry as its own process, over the Kafka protocol."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from ..schema_registry.server import SchemaRegistry, parse_listener, standalone_security
from ..schema_registry.store import client_options


def run(args: argparse.Namespace) -> int:
    """``samsa schema-registry``: the broker's registry as its own process, over the Kafka protocol."""
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
