"""The ``samsa`` operator commands, modelled on Kafka's ``bin/kafka-*.sh`` scripts.

``register(subparsers)`` adds ``topics``, ``configs``, ``consumer-groups``, ``share-groups``,
``console-producer``, ``console-consumer``, ``dump-log``, ``get-offsets``,
``reassign-partitions``, ``leader-election``, ``cluster``, ``acls`` and ``schemas`` to an
argparse sub-parser set (``broker/cli/`` adds them beside ``samsa broker``). Each
sub-parser sets ``func``: a callable taking the parsed namespace and returning the exit
status. All commands but ``dump-log`` and ``schemas`` (Confluent's Schema Registry REST API)
talk to a broker over the Kafka wire protocol only,
so they work unchanged against Kafka itself; this package never imports broker internals.
``cluster`` (a local ZooKeeper and brokers for development) manages processes, and reads the
brokers through the protocol too.

Imports: protocol/ and kafka-python's clients, since they speak the Kafka protocol to a running
broker; for files and local processes also the record formats of groupcoord/ and txn/ (dump-log),
broker/security/scram.py and broker/cluster/zk/server.py; never the broker's running internals
(pyproject.toml's tools-speak-kafka contract).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

from ._common import Subparsers

# The commands' modules (under broker.tools), in the order ``samsa --help`` lists them. They are
# imported by name when the parser is built (importlib.import_module, in ``register`` below: the
# one dynamic import of the tools), not when this package is: the console and other commands
# import broker.tools._common and friends without loading every command (cluster.py, say, imports
# the console package, which imports these helpers).
COMMANDS = ("topics", "configs", "consumer_groups", "share_groups", "console_producer", "console_consumer",
            "dump_log", "get_offsets", "reassign_partitions", "leader_election", "cluster", "acls", "schemas")


def register(subparsers: Subparsers) -> None:
    """Add every operator command to ``subparsers`` (from ``parser.add_subparsers()``)."""
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(subparsers)


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point (``python -m broker.tools``) with the same sub-commands."""
    parser = argparse.ArgumentParser(prog="samsa", description="Samsa operator tools")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    register(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))
