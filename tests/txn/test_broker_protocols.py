"""The Protocols through which txn/, groupcoord/, log/ and broker/share see the broker match the
real broker.

Those layers sit below the composition root (broker/server.py) and cannot import its classes,
so each states what it needs of the broker as a typing.Protocol (txn.plugin.TxnBroker,
groupcoord.plugin.ReplicaManager, broker.share.plugin.ShareBroker, ...).
mypy checks here that broker.server.Broker, the replica manager, its partitions, the topic
registry and the broker properties satisfy them, so a Protocol cannot drift from what it
describes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONFORMANCE = '''
from broker.cluster.metadata import TopicRegistry
from broker.replica.partition import Partition
from broker.replica.replica_manager import ReplicaManager
from broker.server import Broker
import groupcoord.plugin as gp
import log.alter_log_dirs as ald
import broker.share.plugin as sp
import log.cleaner as lc
import txn.plugin as tp

def broker_for_txn(b: Broker) -> tp.TxnBroker:
    return b

def broker_for_share(b: Broker) -> sp.ShareBroker:
    return b

def partition_for_txn(p: Partition) -> tp.HostedPartition:
    return p

def partition_for_groups(p: Partition) -> gp.HostedPartition:
    return p

def partition_for_moves(p: Partition) -> ald.HostedPartition:
    return p

def replicas_for_txn(r: ReplicaManager) -> tp.ReplicaManager:
    return r

def replicas_for_groups(r: ReplicaManager) -> gp.ReplicaManager:
    return r

def topics_for_groups(t: TopicRegistry) -> gp.TopicRegistry:
    return t

def properties(b: Broker) -> tuple[gp.BrokerProperties, lc.BrokerProperties]:
    return b.config, b.config
'''


def test_the_broker_satisfies_the_protocols_of_the_layers_below(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    snippet = tmp_path / "broker_protocols_conformance.py"
    snippet.write_text(CONFORMANCE)
    env = dict(os.environ, MYPYPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", str(snippet)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, ("a Protocol of txn/, groupcoord/, log/ or broker/share no longer "
                                  "matches the broker class it describes:\n" + proc.stdout + proc.stderr)
