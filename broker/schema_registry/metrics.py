"""Schema Registry metrics, under the names Confluent's registry exports through JMX
(``kafka.schema.registry:type=registered-count`` -> ``kafka_schema_registry_registered_count``).

A prometheus-client collector, computed when scraped from the registry's state, plus request
counters kept by the REST layer. It is registered in the broker's ``metrics.listener`` registry
when the broker has one, and served on the registry's own port at ``GET /metrics`` (as Karapace
does), which is what the standalone ``samsa schema-registry`` offers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Protocol

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from .election import PrimaryElection
from .state import RegistryState
from .store import KafkaStore


class MeasuredRegistry(Protocol):
    """What the metrics read of a running registry (:class:`~broker.schema_registry.server.SchemaRegistry`)."""

    state: RegistryState
    store: KafkaStore
    election: PrimaryElection | None


class RegistryMetrics:
    def __init__(self, sr: MeasuredRegistry) -> None:
        self.sr = sr
        self.requests: Counter[tuple[str, int]] = Counter()
        self.registrations = 0

    # called by the REST layer
    def request(self, method: str, status: int) -> None:
        self.requests[(method, status)] += 1

    def registered(self) -> None:
        self.registrations += 1

    def describe(self) -> Iterator[Metric]:
        return iter(())  # collected at scrape time only

    def collect(self) -> Iterator[Metric]:
        st = self.sr.state
        live = [sv for vs in st.subjects.values() for sv in vs.values() if not sv.deleted]
        g = GaugeMetricFamily("kafka_schema_registry_registered_count",
                              "Subject versions registered and not deleted.")
        g.add_metric([], len(live))
        yield g
        by_type = GaugeMetricFamily("kafka_schema_registry_schemas", "Schemas (distinct ids) by format.",
                                    labels=["schema_type"])
        counts = Counter(s.schema_type for s in st.schemas.values())
        for t in ("AVRO", "JSON", "PROTOBUF"):
            by_type.add_metric([t], counts.get(t, 0))
        yield by_type
        subjects = GaugeMetricFamily("kafka_schema_registry_subjects", "Subjects with at least one live version.")
        subjects.add_metric([], len(st.subject_names()))
        yield subjects
        role = GaugeMetricFamily("kafka_schema_registry_master_slave_role",
                                 "1 if this registry is the primary (takes the writes), else 0.")
        election = self.sr.election
        role.add_metric([], 1 if election is not None and election.is_primary() else 0)
        yield role
        offset = GaugeMetricFamily("kafka_schema_registry_schemas_topic_offset",
                                   "Offset of the last _schemas record this registry has applied.")
        offset.add_metric([], self.sr.store.applied)
        yield offset
        created = CounterMetricFamily("kafka_schema_registry_registrations",
                                      "Successful registrations answered by this registry.")
        created.add_metric([], self.registrations)
        yield created
        req = CounterMetricFamily("kafka_schema_registry_requests", "HTTP requests answered, by method and status.",
                                  labels=["method", "status"])
        for (method, status), n in sorted(self.requests.items()):
            req.add_metric([method, str(status)], n)
        yield req
