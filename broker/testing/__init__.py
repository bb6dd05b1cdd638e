"""Samsa in Python test suites: an embedded broker, fault injection and a pytest plugin.

    from broker.testing import SamsaBroker

    with SamsaBroker() as kafka:
        kafka.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=3, topic="orders")
        ...  # run the application against kafka.bootstrap_servers

See :mod:`broker.testing.embedded` (the broker), :mod:`broker.testing.faults` (the rules and
recorded requests) and :mod:`broker.testing.pytest_plugin` (fixtures).
"""

from ..hooks import Fault, HookedRequest
from .embedded import SamsaBroker
from .faults import FaultPlan, RecordedRequest, Rule

__all__ = ["Fault", "FaultPlan", "HookedRequest", "RecordedRequest", "Rule", "SamsaBroker"]
