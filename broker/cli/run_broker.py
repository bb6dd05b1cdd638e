"""``samsa broker`` (and ``python -m broker``): load the configuration and serve until stopped."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from types import ModuleType

from protocol.errors import KafkaError

from .. import cpu_affinity, malloc_tuning
from ..cluster.zk.client import BrokerIdInUse, ZooKeeperUnavailable
from ..config.properties import BrokerConfig
from ..console import ConsoleSidecar
from ..security import SecurityConfigError
from ..server import Broker

uvloop: ModuleType | None
try:  # optional: the faster event loop, unless --no-uvloop
    import uvloop
except ImportError:
    uvloop = None


def run(args: argparse.Namespace) -> int:
    try:
        config = BrokerConfig.load(args.config_opt or args.config, dict(args.override))
    except KafkaError as e:
        print(f"samsa: invalid configuration: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=str(config["log.level"]).upper(),
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")
    try:
        cpu_affinity.apply(str(config["cpu.affinity"]))  # before any thread: they inherit it
    except (ValueError, OSError) as e:
        print(f"samsa: invalid configuration: cpu.affinity: {e}", file=sys.stderr)
        return 2
    if not args.no_uvloop and uvloop is not None:
        uvloop.install()
    malloc_tuning.tune(bool(config["malloc.tuning.enable"]))  # before the first large buffers
    try:
        # the web console runs beside the broker when console.listener is set
        sidecars = [ConsoleSidecar(config)] if str(config.get("console.listener") or "").strip() else []
        broker = Broker(config, sidecars=sidecars)  # security is built here: a bad setting stops us
        asyncio.run(broker.serve_forever())
    except (OSError, BrokerIdInUse, ZooKeeperUnavailable) as e:
        logging.getLogger("samsa.server").error("Fatal error during startup: %s", e)
        return 1
    except SecurityConfigError as e:  # a bad certificate, keystore or SASL setting: no traceback
        logging.getLogger("samsa.server").error("Invalid security configuration: %s", e)
        return 1
    return 0
