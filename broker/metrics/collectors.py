"""Scrape-time collectors: the broker's state read when Prometheus asks, under Kafka's names.

Theory of operation. Each collector is a prometheus-client custom collector whose ``collect()``
walks the broker's own structures (partitions, groups, transactions, connections) and yields
metric families; nothing is kept up to date between scrapes, so the hot path pays nothing for
a gauge. State is read on the event loop, so a scrape sees one consistent moment and needs no
locks; collectors never await, do no I/O beyond ``/proc`` reads, and tolerate components that
are absent (``getattr(..., None)``). The two that grow with the partition count
(:class:`ReplicaManagerCollector`, :class:`GroupCoordinatorCollector`) split the work so that
:meth:`broker.metrics.BrokerMetrics.render` can let Kafka requests run in between: their
``prepare()`` is a generator that copies numbers into tuples, pausing (``yield``) every
``READ_CHUNK`` partitions, and returns a builder that makes the families from those tuples
alone, in chunks of ``CHUNK`` samples. As with a JMX scrape of Kafka, values read at different
pauses may be a few milliseconds apart; each partition's own numbers are read together. Their
``collect()`` does it all at once, for a caller that reads
``broker.metrics.registry`` directly (where ``_merged``
joins the chunks back into one family).

Names are what the common JMX exporter rules make of Kafka's MBeans (lower-cased,
``kafka.server:type=ReplicaManager,name=LeaderCount`` -> ``kafka_server_replicamanager_leadercount``,
``...PerSec`` meters -> ``..._total`` counters, per-topic values labelled ``topic`` beside an
unlabelled all-topics sample), so existing Kafka dashboards mostly work; consumer lag uses
kafka-exporter's names. Metrics Kafka has no MBean for are prefixed ``samsa_``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import cast

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from broker.replica.replica_manager import TopicPartition
from groupcoord.consumer.group import ConsumerGroup
from groupcoord.group import GroupMetadata
from log.cleaner import CleanerStats
from log.cleaner_manager import dirty_ratio
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from .host import MetricsHost
from .stats import FETCH_CONSUMER, FETCH_FOLLOWER, BrokerTopicStats, EventLoopLag, Histogram, RequestStats

# TopicStats field -> (BrokerTopicMetrics meter, help)
TOPIC_METERS = (
    ("messages_in", "messagesin", "Messages appended to the log by Produce requests."),
    ("bytes_in", "bytesin", "Record bytes received in Produce requests (as sent by the client)."),
    ("bytes_out", "bytesout", "Record bytes sent in Fetch responses."),
    ("failed_produce", "failedproducerequests", "Produce partition requests that failed."),
    ("failed_fetch", "failedfetchrequests", "Fetch partition requests that failed."),
    ("total_produce", "totalproducerequests", "Produce partition requests, failed or not."),
    ("total_fetch", "totalfetchrequests", "Fetch partition requests, failed or not."),
    ("replication_bytes_out", "replicationbytesout", "Record bytes sent to follower replicas."),
    ("replication_bytes_in", "replicationbytesin", "Record bytes fetched from leaders and appended here."),
)

# RequestMetrics histogram -> ApiRequestStats attribute (None: always 0 in Samsa)
REQUEST_TIMES = (
    ("requestqueuetimems", "queue", "Time the request waited behind earlier requests on its connection."),
    ("localtimems", "local", "Time the request's code ran on the event loop (decode, handle, encode)."),
    ("remotetimems", "remote", "Time the handler was suspended waiting (long poll, coordinator, replicas)."),
    ("throttletimems", "throttle", "Quota throttle given to the request (KIP-219: the connection is muted after)."),
    ("responsequeuetimems", None, "Time the response waited to be sent (written at once: always 0)."),
    ("responsesendtimems", "send", "Time to hand the response to the socket, waiting for slow readers."),
    ("totaltimems", "total", "Time from the request read off the socket to its response written."),
)


def _api_name(key: int) -> str:
    if key == FETCH_CONSUMER:
        return "FetchConsumer"
    if key == FETCH_FOLLOWER:
        return "FetchFollower"

    try:
        return "".join(w.capitalize() for w in ApiKey(key).name.split("_"))
    except ValueError:
        return str(key)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


# Samples per family chunk: the large per-partition families are built and written in pieces
# this size, so a scrape of 10,000 partitions yields the event loop between pieces.
CHUNK = 500
READ_CHUNK = 250  # partitions (or committed offsets) read between two pauses


def _drive(prep: Generator[None, None, Callable[[], Iterator[Metric]]]) -> Callable[[], Iterator[Metric]]:
    """Run a ``prepare()`` generator to the end without pausing; return its builder."""
    while True:
        try:
            next(prep)
        except StopIteration as done:
            return done.value


# A partition's row in ReplicaManagerCollector: topic, partition, size, segments, log start offset,
# log end offset, high watermark.
PartitionRow = tuple[str, int, int, int, int, int, int]


def _gauge_chunks(name: str, doc: str, labels: list[str], rows: list[tuple[list[str], float]],
                  ) -> Iterator[GaugeMetricFamily]:
    """One gauge family of ``(label values, value)`` rows as consecutive chunks of at most CHUNK
    samples (at least one chunk); the samples are made one chunk at a time."""
    for i in range(0, max(len(rows), 1), CHUNK):
        fam = GaugeMetricFamily(name, doc, labels=labels)
        for lv, v in rows[i:i + CHUNK]:
            fam.add_metric(lv, v)
        yield fam


def _partition_gauge_chunks(name: str, doc: str, rows: list[PartitionRow], col: int) -> Iterator[GaugeMetricFamily]:
    """A per-partition gauge family (labels topic, partition) of column ``col`` of the rows, in chunks
    as :func:`_gauge_chunks`."""
    for i in range(0, max(len(rows), 1), CHUNK):
        fam = GaugeMetricFamily(name, doc, labels=["topic", "partition"])
        for row in rows[i:i + CHUNK]:
            fam.add_metric([row[0], str(row[1])], cast(int, row[col]))  # columns 2-6 are counts
        yield fam


def _merged(fams: Iterable[Metric]) -> Iterator[Metric]:
    """Consecutive chunks of one family joined back into one family (for a direct ``collect()``)."""
    last: Metric | None = None
    for fam in fams:
        if last is not None and fam.name == last.name:
            last.samples.extend(fam.samples)
            continue
        if last is not None:
            yield last
        last = fam
    if last is not None:
        yield last


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


class BrokerTopicMetricsCollector(Collector):
    """``kafka.server:type=BrokerTopicMetrics``: per-topic and all-topics counters."""

    def __init__(self, broker: MetricsHost, stats: BrokerTopicStats) -> None:
        self.broker = broker
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        stats = self.stats
        stats.retire_missing({t.name for t in self.broker.topics})
        totals = stats.totals()
        items = sorted(stats.topics.items())
        for field, meter, doc in TOPIC_METERS:
            name = f"kafka_server_brokertopicmetrics_{meter}"
            fam = CounterMetricFamily(name, doc)
            fam.add_sample(name + "_total", {}, float(getattr(totals, field)))
            for topic, s in items:
                fam.add_sample(name + "_total", {"topic": topic}, float(getattr(s, field)))
            yield fam


class RequestMetricsCollector(Collector):
    """``kafka.network:type=RequestMetrics``: requests per API and version, time histograms."""

    def __init__(self, stats: RequestStats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        apis = sorted((_api_name(k), s) for k, s in self.stats.apis.items())
        req = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests served, by API and version.",
                                  labels=["request", "version"])
        for name, s in apis:
            for version, n in sorted(s.versions.items()):
                req.add_metric([name, str(version)], float(n))
        yield req
        errors = CounterMetricFamily("kafka_network_requestmetrics_errors",
                                     "Error codes in responses, by API and error (Kafka's ErrorsPerSec; NONE "
                                     "included, each partition's code counted).", labels=["request", "error"])
        for name, s in apis:
            for code, n in sorted(s.errors.items()):
                errors.add_metric([name, _error_name(code)], float(n))
        yield errors
        for metric, attr, doc in REQUEST_TIMES:
            fam = HistogramMetricFamily(f"kafka_network_requestmetrics_{metric}", doc + " Milliseconds.",
                                        labels=["request"])
            for name, s in apis:
                h: Histogram | None = getattr(s, attr) if attr else None
                if h is None:  # all in the first bucket, summing to 0
                    zero = Histogram()
                    zero.counts[0] = s.total.count
                    h = zero
                fam.add_metric([name], h.cumulative(), h.sum)
            yield fam


def _listener_names(broker: MetricsHost) -> dict[int, str]:
    return {lst.port: lst.name for lst in broker.config.listeners}


class SocketServerCollector(Collector):
    """``kafka.server:type=socket-server-metrics``: open connections per listener."""

    def __init__(self, broker: MetricsHost) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        by_port = _listener_names(self.broker)
        counts = dict.fromkeys(by_port.values(), 0)
        for conn in list(self.broker.connections):
            name = getattr(conn, "listener_name", None)
            if name is None:  # older connections: tell the listener by the local port
                t = conn.transport
                sock = t.get_extra_info("sockname") if t is not None else None
                name = by_port.get(sock[1], "UNKNOWN") if sock else "UNKNOWN"
            counts[name] = counts.get(name, 0) + 1
        fam = GaugeMetricFamily("kafka_server_socketservermetrics_connection_count",
                                "Open client connections, by listener.", labels=["listener"])
        for name, n in sorted(counts.items()):
            fam.add_metric([name], n)
        yield fam
        yield from self._connection_quotas()

    def _connection_quotas(self) -> Iterator[Metric]:
        """broker/network/connection_quotas.py: creation rate, accept throttling, per-IP rejections, and the
        request bytes buffered in connections (Kafka's SocketServer MemoryPoolUsed)."""
        quotas = self.broker.connection_quotas
        rate = GaugeMetricFamily("kafka_server_socketservermetrics_connection_creation_rate",
                                 "New connections per second over the last 30 s, by listener.", labels=["listener"])
        throttle = CounterMetricFamily("kafka_server_socketservermetrics_connection_accept_throttle_time_ms",
                                       "Milliseconds the acceptor delayed new connections for "
                                       "max.connection.creation.rate.", labels=["listener"])
        blocked = CounterMetricFamily("kafka_network_acceptor_blocked_time_ms",
                                      "Milliseconds the acceptor waited for a connection slot or the creation "
                                      "rate (Kafka's AcceptorBlockedPercent, as a total).", labels=["listener"])
        rejected = CounterMetricFamily("kafka_server_socketservermetrics_connections_rejected",
                                       "New connections closed: per-IP limit (reason=max_connections_per_ip), "
                                       "shed for the inter-broker listener (reason=max_connections), or over their "
                                       "address's connection_creation_rate quota (reason=ip_connection_rate).",
                                       labels=["listener", "reason"])
        for name, lq in sorted(quotas.listeners.items()):
            rate.add_metric([name], quotas.creation_rate(name))
            throttle.add_metric([name], lq.throttle_ms_total)
            blocked.add_metric([name], lq.blocked_ms_total)
            rejected.add_metric([name, "max_connections_per_ip"], lq.rejected)
            rejected.add_metric([name, "max_connections"], lq.closed_excess)
            rejected.add_metric([name, "ip_connection_rate"], lq.ip_throttled)
        yield from (rate, throttle, blocked, rejected)
        used = sum(getattr(c, "queued_bytes", 0) + c.decoder.buffered for c in list(self.broker.connections))
        yield _gauge("kafka_network_socketserver_memorypoolused",
                     "Request bytes read and buffered in connections, not yet served.", used)


class ReplicaManagerCollector(Collector):
    """ReplicaManager, KafkaController and per-partition Log gauges."""

    def __init__(self, broker: MetricsHost) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        return _merged(_drive(self.prepare())())

    def prepare(self) -> Generator[None, None, Callable[[], Iterator[Metric]]]:
        """Read the partitions, pausing (``yield``) every READ_CHUNK; return the family builder."""
        broker = self.broker
        me = broker.broker_id
        leaders = under = under_min = at_min = 0
        rows = []
        for i, p in enumerate(list(broker.replica_manager.partitions.values())):
            if i % READ_CHUNK == READ_CHUNK - 1:
                yield
            if getattr(p, "leader_id", me) == me:
                leaders += 1
                isr = len(getattr(p, "isr", ()))
                if isr < len(getattr(p, "replicas", ())):
                    under += 1
                min_isr = getattr(p, "min_insync_replicas", 1)
                if isr < min_isr:
                    under_min += 1
                elif isr == min_isr:
                    at_min += 1
            lg = p.log
            segments = lg.segments
            rows.append((p.tp.topic, p.tp.partition, sum(s.size for s in segments), len(segments),
                         lg.log_start_offset, lg.log_end_offset, p.high_watermark))
        active, offline = broker.metadata_support.controller_metrics()
        changes = getattr(broker.replica_manager, "isr_changes", None)
        counts = (len(rows), leaders, under, under_min, at_min, active, offline,
                  getattr(changes, "shrinks", 0), getattr(changes, "expands", 0))
        return lambda: self._families(rows, counts)

    @staticmethod
    def _families(rows: list[PartitionRow],
                  counts: tuple[int, ...]) -> Iterator[Metric]:
        parts, leaders, under, under_min, at_min, active, offline, shrinks, expands = counts
        prefix = "kafka_server_replicamanager_"
        yield CounterMetricFamily(prefix + "isrshrinks", "ISR shrinks this broker made as leader "
                                  "(IsrShrinksPerSec).", value=shrinks)
        yield CounterMetricFamily(prefix + "isrexpands", "ISR expansions this broker made as leader "
                                  "(IsrExpandsPerSec).", value=expands)
        yield _gauge(prefix + "partitioncount", "Partitions hosted by this broker.", parts)
        yield _gauge(prefix + "leadercount", "Partitions this broker leads.", leaders)
        yield _gauge(prefix + "underreplicatedpartitions",
                     "Partitions led here whose ISR is smaller than their replica set.", under)
        yield _gauge(prefix + "underminisrpartitioncount",
                     "Partitions led here whose ISR is below min.insync.replicas.", under_min)
        yield _gauge(prefix + "atminisrpartitioncount",
                     "Partitions led here whose ISR is exactly min.insync.replicas.", at_min)
        yield _gauge(prefix + "offlinereplicacount",
                     "Replicas offline because their log directory failed (Samsa: none).", 0)
        yield _gauge("kafka_controller_kafkacontroller_activecontrollercount",
                     "1 on the broker that is the active controller.", active)
        yield _gauge("kafka_controller_kafkacontroller_offlinepartitionscount",
                     "Partitions without a live leader (reported by the active controller).", offline)
        for col, name, doc in ((2, "kafka_log_log_size", "Bytes in the partition's log segments."),
                               (4, "kafka_log_log_logstartoffset", "The partition's log start offset."),
                               (5, "kafka_log_log_logendoffset", "The partition's log end offset."),
                               (3, "kafka_log_log_numlogsegments", "Segments in the partition's log."),
                               (6, "samsa_partition_high_watermark",
                                "The partition's high watermark (what consumers can read up to).")):
            yield from _partition_gauge_chunks(name, doc, rows, col)


class FetchSessionCacheCollector(Collector):
    """``kafka.server:type=FetchSessionCache``: the incremental fetch sessions (KIP-227) this broker
    keeps for consumers and followers (broker/replica/fetch_session.py), read from the cache's
    own counts (no walk over the sessions)."""

    def __init__(self, broker: MetricsHost) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        cache = self.broker.fetch_sessions
        prefix = "kafka_server_fetchsessioncache_"
        yield _gauge(prefix + "numincrementalfetchsessions",
                     "Incremental fetch sessions cached (consumers' and followers').", len(cache))
        yield _gauge(prefix + "numincrementalfetchpartitionscached",
                     "Partitions cached over all incremental fetch sessions.", cache.num_partitions)
        yield CounterMetricFamily(prefix + "incrementalfetchsessionevictions",
                                  "Fetch sessions evicted to make room for new ones "
                                  "(IncrementalFetchSessionEvictionsPerSec; "
                                  "max.incremental.fetch.session.cache.slots).", value=cache.evictions)


class GroupCoordinatorCollector(Collector):
    """GroupMetadataManager gauges, and consumer lag the way kafka-exporter computes it."""

    STATES = ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead")

    def __init__(self, broker: MetricsHost) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        return _merged(_drive(self.prepare())())

    def prepare(self) -> Generator[None, None, Callable[[], Iterator[Metric]]]:
        """Read groups, committed offsets and high watermarks, pausing every READ_CHUNK offsets."""
        coord = self.broker.group_coordinator
        rm_parts = self.broker.replica_manager.partitions
        groups = []  # (group id, state, generation or group epoch, members, protocol)
        current: list[tuple[list[str], float]] = []
        lag: list[tuple[list[str], float]] = []
        lag_sums: list[tuple[list[str], float]] = []
        n_offsets = 0
        # Classic groups and KIP-848 consumer groups: lag is the same for both.
        both: list[tuple[str, GroupMetadata | ConsumerGroup, str]] = \
            [(gid, g, "classic") for gid, g in list(coord.groups.items())]
        both += [(gid, g, "consumer") for gid, g in list(coord.consumer_groups.items())]
        for gid, g, protocol in sorted(both, key=lambda x: (x[0], x[2])):
            epoch = getattr(g, "generation_id", None)
            epoch = int(getattr(g, "group_epoch", 0) if epoch is None else epoch)
            groups.append((gid, str(getattr(getattr(g, "state", None), "value", "Unknown")),
                           epoch, len(getattr(g, "members", {})), protocol))
            sums: dict[str, int] = {}
            for (topic, partition), om in sorted(getattr(g, "offsets", {}).items()):
                n_offsets += 1
                if n_offsets % READ_CHUNK == 0:
                    yield
                committed = int(getattr(om, "offset", -1))
                if committed < 0:
                    continue
                labels = [gid, topic, str(partition)]
                current.append((labels, committed))
                part = rm_parts.get(TopicPartition(topic, partition))
                if part is None:  # not hosted here: its high watermark is another broker's to report
                    continue
                n = max(part.high_watermark - committed, 0)
                lag.append((labels, n))
                sums[topic] = sums.get(topic, 0) + n
            lag_sums.extend(([gid, topic], n) for topic, n in sorted(sums.items()))
        return lambda: self._families(groups, n_offsets, current, lag, lag_sums)

    def _families(self, groups: list[tuple[str, str, int, int, str]], n_offsets: int,
                  current: list[tuple[list[str], float]], lag: list[tuple[list[str], float]],
                  lag_sums: list[tuple[list[str], float]]) -> Iterator[Metric]:
        by_state = dict.fromkeys(self.STATES, 0)
        by_state_protocol: dict[tuple[str, str], int] = {(s, "classic"): 0 for s in self.STATES}
        rebalances = 0
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        members = GaugeMetricFamily("kafka_consumergroup_members", "Members of a group.",
                                    labels=["consumergroup"])
        generation = GaugeMetricFamily("samsa_consumergroup_generation",
                                       "A classic group's generation id (rebalances it has completed), "
                                       "a consumer group's (KIP-848) group epoch.",
                                       labels=["consumergroup"])
        for gid, state, gen, n_members, protocol in groups:
            by_state[state] = by_state.get(state, 0) + 1
            by_state_protocol[(state, protocol)] = by_state_protocol.get((state, protocol), 0) + 1
            if protocol == "classic":
                rebalances += gen
            generation.add_metric([gid], gen)
            members.add_metric([gid], n_members)
        yield _gauge(prefix + "numgroups", "Groups this coordinator owns (classic and consumer).", len(groups))
        for state in self.STATES:
            yield _gauge(prefix + "numgroups" + state.lower(), f"Groups in state {state}.", by_state.get(state, 0))
        state_fam = GaugeMetricFamily("samsa_group_coordinator_groups",
                                      "Groups by state and protocol (classic, or KIP-848 consumer).",
                                      labels=["state", "protocol"])
        for (state, protocol), n in sorted(by_state_protocol.items()):
            state_fam.add_metric([state, protocol], n)
        yield state_fam
        yield _gauge(prefix + "numoffsets", "Committed offsets held by this coordinator.", n_offsets)
        yield _gauge("kafka_server_group_coordinator_metrics_group_rebalance_count",
                     "Rebalances completed by the classic groups this coordinator owns (sum of generations).",
                     rebalances)

        yield from _gauge_chunks("kafka_consumergroup_current_offset", "Committed offset of a group.",
                                 ["consumergroup", "topic", "partition"], current)
        yield from _gauge_chunks("kafka_consumergroup_lag",
                                 "High watermark minus the group's committed offset (0 if ahead).",
                                 ["consumergroup", "topic", "partition"], lag)
        yield from _gauge_chunks("kafka_consumergroup_lag_sum", "Lag of a group summed over a topic.",
                                 ["consumergroup", "topic"], lag_sums)
        yield from (members, generation)


class TransactionCoordinatorCollector(Collector):
    """Transactional ids by state and the age of the oldest open transaction (a hanging one)."""

    def __init__(self, broker: MetricsHost) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        by_state: dict[str, int] = {}
        now_ms = int(time.time() * 1000)
        oldest = 0.0
        for md in list(self.broker.txn_coordinator.transactions.values()):
            name = md.state.wire_name
            by_state[name] = by_state.get(name, 0) + 1
            started = md.txn_start_timestamp
            if name in ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence") and started > 0:
                oldest = max(oldest, (now_ms - started) / 1000)
        fam = GaugeMetricFamily("samsa_transaction_coordinator_transactional_ids",
                                "Transactional ids owned by this coordinator, by transaction state.",
                                labels=["state"])
        for name, n in sorted(by_state.items()):
            fam.add_metric([name], n)
        yield fam
        yield _gauge("samsa_transaction_coordinator_oldest_open_transaction_age_seconds",
                     "Age of the oldest transaction not yet completed (0 if none).", oldest)


class LogCleanerCollector(Collector):
    """``kafka.log:type=LogCleaner`` / ``LogCleanerManager``: what compaction has done."""

    def __init__(self, broker: MetricsHost) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        cleaner = self.broker.log_cleaner
        stats = cleaner.stats
        yield _gauge("kafka_log_logcleaner_deadthreadcount", "Cleaner tasks that died.", 1 if cleaner.died else 0)
        # As Kafka's gauges: over the last pass (lastStats), 0 before the first one.
        last = cleaner.last_stats or CleanerStats()
        read = float(last.bytes_read)
        written = float(last.bytes_written)
        yield _gauge("kafka_log_logcleaner_cleaner_recopy_percent",
                     "Bytes written as a percentage of bytes read by the last cleaning pass.",
                     100.0 * written / read if read else 0.0)
        yield _gauge("kafka_log_logcleaner_max_clean_time_secs", "Duration of the last cleaning pass, seconds.",
                     float(last.seconds))
        yield _gauge("kafka_log_logcleaner_max_buffer_utilization_percent",
                     "Share of the dedupe buffer (log.cleaner.dedupe.buffer.size) the last pass's offset map "
                     "filled, percent.", 100.0 * cleaner.last_buffer_utilization)
        yield _gauge("kafka_log_logcleanermanager_time_since_last_run_ms",
                     "Milliseconds since the cleaner last looked for logs to clean.",
                     max(0.0, time.time() * 1000 - cleaner.last_run_ms))
        max_dirty = 0.0
        for lg in cleaner.compacted_logs():
            max_dirty = max(max_dirty, dirty_ratio(lg, cleaner.first_dirty(lg)))
        yield _gauge("kafka_log_logcleanermanager_max_dirty_percent",
                     "Largest dirty ratio among compacted logs, in percent.", 100.0 * max_dirty)
        for attr, name, doc in (
                ("passes", "passes", "Cleaning passes completed."),
                ("bytes_read", "bytes_read", "Bytes read by the cleaner."),
                ("bytes_written", "bytes_written", "Bytes written by the cleaner."),
                ("segments_cleaned", "segments_cleaned", "Segments rewritten by the cleaner."),
                ("records_removed", "records_removed", "Records removed by compaction."),
                ("tombstones_removed", "tombstones_removed", "Tombstones removed past delete.retention.ms."),
                ("seconds", "clean_time_seconds", "Time spent cleaning.")):
            yield CounterMetricFamily(f"samsa_log_cleaner_{name}", doc, value=float(getattr(stats, attr)))


class EventLoopCollector(Collector):
    """How late the event loop wakes up: the latency every request on this broker shares."""

    def __init__(self, lag: EventLoopLag) -> None:
        self.lag = lag

    def collect(self) -> Iterator[Metric]:
        lag = self.lag
        yield _gauge("samsa_event_loop_lag_seconds", "Lateness of the last event-loop probe.", lag.last)
        yield _gauge("samsa_event_loop_lag_max_seconds", "Largest probe lateness since the previous scrape.",
                     lag.take_max())
        fam = HistogramMetricFamily("samsa_event_loop_lag_ms", "Event-loop probe lateness, milliseconds.")
        fam.add_metric([], lag.histogram.cumulative(), lag.histogram.sum)
        yield fam
