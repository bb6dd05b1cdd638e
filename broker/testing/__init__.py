"""Samsa in Python test suites: an embedded broker, fault injection and a pytest plugin.

    from broker.testing import SamsaBroker

    with SamsaBroker() as kafka:
        kafka.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=3, topic="orders")
        ...  # run the application against kafka.bootstrap_servers

See :mod:`broker.testing.embedded` (the broker), :mod:`broker.testing.faults` (the rules and
recorded requests) and :mod:`broker.testing.pytest_plugin` (fixtures).

The names are imported on first use: pytest loads the plugin (``broker.testing.pytest_plugin``)
in every session of every project where the package is installed, and that must not import
the broker, the codec or the clients until a test asks for a fixture.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..hooks import Fault, HookedRequest
    from .embedded import SamsaBroker
    from .faults import FaultPlan, RecordedRequest, Rule

_WHERE = {"Fault": "..hooks", "HookedRequest": "..hooks", "SamsaBroker": ".embedded", "FaultPlan": ".faults",
          "RecordedRequest": ".faults", "Rule": ".faults"}
__all__ = ["Fault", "FaultPlan", "HookedRequest", "RecordedRequest", "Rule", "SamsaBroker"]


def __getattr__(name: str) -> object:  # PEP 562: the names above, imported on first use
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name], __name__), name)
    globals()[name] = value
    return value
