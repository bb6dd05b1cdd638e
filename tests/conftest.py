"""Shared fixtures for tests/: ``broker``, ``broker_factory``, ``tansu_broker``.

See tests/support/fixtures.py.  The repository root is put on sys.path so the
helpers import as ``tests.support`` whichever directory pytest starts from.
"""

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tests.support.fixtures import (  # noqa: E402,F401
    broker,
    broker_factory,
    pytest_runtest_makereport,
    tansu_broker,
)
