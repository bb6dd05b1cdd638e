"""Fixtures for the stock-client compatibility tests.

The broker fixtures are the shared ones from tests/support/fixtures.py.  Set
``SAMSA_TEST_BROKER=tansu`` to run every client against the reference broker
instead (that is how these tests were validated before Samsa existed).
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
