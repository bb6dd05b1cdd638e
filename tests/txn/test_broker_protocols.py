"""The Protocols through which log/ sees the broker match the real broker.

log/ sits below broker/ and cannot import its classes, so it states what it needs of the broker
as a typing.Protocol (log.alter_log_dirs.HostedPartition, log.cleaner.BrokerProperties). mypy
checks here that the broker's partitions and properties satisfy them, so a Protocol cannot drift
from what it describes. (The coordinators' glue to the broker is in broker/coordinators/, typed
against the broker's own classes, so the ordinary mypy run checks it.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONFORMANCE = '''
from broker.replica.partition import Partition
from broker.server import Broker
import log.alter_log_dirs as ald
import log.cleaner as lc

def partition_for_moves(p: Partition) -> ald.HostedPartition:
    return p

def properties(b: Broker) -> lc.BrokerProperties:
    return b.config
'''


def test_the_broker_satisfies_the_protocols_of_the_layers_below(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    snippet = tmp_path / "broker_protocols_conformance.py"
    snippet.write_text(CONFORMANCE)
    env = dict(os.environ, MYPYPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", str(snippet)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, ("a Protocol of log/ no longer matches the "
                                  "broker class it describes:\n" + proc.stdout + proc.stderr)
