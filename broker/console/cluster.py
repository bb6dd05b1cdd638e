"""What the console knows about the cluster, learned over the Kafka protocol only.

Theory of operation: :class:`ClusterView` owns one kafka-python ``KafkaAdminClient`` and one
``KafkaConsumer`` (for browsing), both used only from one worker thread (a single-thread
executor), so the clients' blocking calls never run on the broker's event loop and never
race each other. The event loop awaits :meth:`ClusterView.call`; it never blocks on Kafka.
Because everything goes through the protocol (Metadata, DescribeCluster, DescribeLogDirs,
ListOffsets, DescribeConfigs, ListGroups/DescribeGroups/OffsetFetch, ListTransactions,
DescribeTransactions, DescribeProducers, and CreateTopics/CreatePartitions/
IncrementalAlterConfigs/OffsetCommit/DeleteRecords for writes), a console pointed at any
broker shows the whole cluster, and would show a Kafka cluster just the same.

A sampler (:meth:`ClusterView.sample`, every :data:`SAMPLE_INTERVAL_S` or slower when a
sample is slow) records log end offsets, partition sizes on the leader and each group's
committed offsets. Rates are differences between consecutive samples: messages in/s from end
offsets. Bytes in/out per second come from the brokers' Prometheus endpoints
(``console.metrics.urls``, default this broker's ``metrics.listener``; the all-topics
``kafka_server_brokertopicmetrics_bytesin_total``/``bytesout_total`` counters of broker/metrics/)
when every one answers; otherwise from the protocol alone: bytes in from leader sizes (a
partition that shrank, i.e. retention, counts 0), bytes out estimated as the records consumer
groups committed times each partition's mean record size. Each point says its ``source``.
The history is a bounded ring (:data:`HISTORY`) for the live charts.

Invariant: every method returns plain JSON-able values; a Kafka error becomes
:class:`ConsoleError` with Kafka's error name, which the HTTP layer answers as 4xx/5xx.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import TypeVar
from urllib.parse import quote

from kafka import KafkaConsumer
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    OffsetSpec,
    OffsetTimestamp,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import KafkaError
from kafka.protocol.admin import DescribeClientQuotasRequest, IncrementalAlterConfigsRequest
from kafka.structs import OffsetAndMetadata, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from broker.tools._common import JSON, error_name, send_request
from broker.tools.configs import describe_configs
from broker.tools.consumer_groups import describe_group, describe_groups_raw
from protocol.kafka_uuid import to_string

from . import messages

log = logging.getLogger("samsa.console")

SAMPLE_INTERVAL_S = 2.0
HISTORY = 180  # samples kept for the charts: 6 minutes at 2 s
MAX_SAMPLED_GROUPS = 50
REQUEST_TIMEOUT_MS = 10000
METADATA_MAX_AGE_MS = 10000  # brokers joining or leaving show up within this
STALE_METADATA_ERRORS = frozenset({"UnknownBrokerIdError", "NotLeaderForPartitionError", "NotLeaderOrFollowerError",
                                   "LeaderNotAvailableError", "NotCoordinatorError",
                                   "NotCoordinatorForGroupError"})
UNREACHABLE_ERRORS = frozenset({"NoBrokersAvailable", "KafkaTimeoutError", "KafkaConnectionError"})
METRIC_BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"  # broker/metrics/, all topics
METRIC_BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"


def samsa_version() -> str:
    try:
        return version("samsa-broker")
    except PackageNotFoundError:
        return "unknown"


class ConsoleError(Exception):
    """A failure the console reports to its user: HTTP ``status`` and a message."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


T = TypeVar("T")


@dataclass
class Sample:
    """One raw sample, kept until the next for the rates: offsets and sizes by (topic, partition)."""

    t: float
    ends: dict[tuple[str, int], int]
    starts: dict[tuple[str, int], int]
    sizes: dict[tuple[str, int], int]
    committed: dict[str, dict[tuple[str, int], int]]  # group -> committed offsets
    metrics: tuple[float, float] | None  # bytes in/out counters from /metrics, when scraped


class ClusterView:
    """The cluster seen through the Kafka protocol, with a short history of samples."""

    def __init__(self, bootstrap: list[str], metrics_urls: list[str] | None = None,
                 schema_registry_url: str = "") -> None:
        self.bootstrap = bootstrap
        self.metrics_urls = metrics_urls or []
        self.schema_registry_url = schema_registry_url.rstrip("/")
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="samsa-console")
        self._admin: KafkaAdminClient | None = None
        self._consumer: KafkaConsumer | None = None
        self.history: deque[dict[str, JSON]] = deque(maxlen=HISTORY)
        self.group_history: dict[str, deque[tuple[float, int]]] = {}
        self._last: Sample | None = None  # the previous raw sample, for rates
        self.topic_rates: dict[str, float] = {}

    # --- threading ------------------------------------------------------------------------

    async def call(self, fn: Callable[..., T], *args: object) -> T:
        """Run ``fn(*args)`` on the worker thread; the event loop only awaits it."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._guarded, fn, args)

    def _guarded(self, fn: Callable[..., T], args: tuple[object, ...]) -> T:
        try:
            try:
                return fn(*args)
            except KafkaError as e:
                if type(e).__name__ not in STALE_METADATA_ERRORS and type(e).__name__ not in UNREACHABLE_ERRORS:
                    raise
                # The clients' view of the cluster is older than the cluster (a broker joined, a
                # leader moved): start over from the bootstrap servers once.
                log.debug("Console: %s; refreshing the cluster view", e)
                self._reset_clients()
                return fn(*args)
        except ConsoleError:
            raise
        except KafkaError as e:
            if type(e).__name__ in UNREACHABLE_ERRORS:
                self._reset_clients()
                raise ConsoleError(f"cannot reach the cluster at {','.join(self.bootstrap)}: {e}", 503) from e
            raise ConsoleError(f"{type(e).__name__}: {e}", 400) from e

    def _reset_clients(self) -> None:
        for c in (self._admin, self._consumer):
            try:
                if c is not None:
                    c.close()
            except Exception:
                pass
        self._admin = self._consumer = None

    def close(self) -> None:
        fut = self._executor.submit(self._reset_clients)
        try:
            fut.result(timeout=5)
        except Exception:
            pass
        self._executor.shutdown(wait=False, cancel_futures=True)

    @property
    def admin(self) -> KafkaAdminClient:
        if self._admin is None:
            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="samsa-console",
                                           request_timeout_ms=REQUEST_TIMEOUT_MS,
                                           bootstrap_timeout_ms=REQUEST_TIMEOUT_MS,
                                           metadata_max_age_ms=METADATA_MAX_AGE_MS)
        return self._admin

    @property
    def consumer(self) -> KafkaConsumer:
        if self._consumer is None:
            self._consumer = messages.new_consumer(self.bootstrap, REQUEST_TIMEOUT_MS)
        return self._consumer

    # --- reads ----------------------------------------------------------------------------

    def _topics(self, names: list[str] | None = None) -> list[dict[str, JSON]]:
        out = []
        for t in self.admin.describe_topics(names):
            if t.get("error_code"):
                if names is not None:
                    raise ConsoleError(f"topic {t.get('name')!r}: {error_name(t['error_code'])}", 404)
                continue
            out.append(t)
        return out

    def _offsets(self, tps: list[TopicPartition], spec: OffsetSpec | OffsetTimestamp) -> dict[TopicPartition, int]:
        if not tps:
            return {}
        res = self.admin.list_partition_offsets({tp: spec for tp in tps})
        return {tp: r.offset for tp, r in res.items()}

    def _sizes(self) -> dict[tuple[str, int, int], int]:
        """(topic, partition, broker) -> bytes on that broker's disk, from DescribeLogDirs."""
        out: dict[tuple[str, int, int], int] = {}
        answers = []
        for node in sorted(b.node_id for b in self.admin._manager.cluster.brokers()):
            try:  # one broker at a time: a broker that just went away costs only its own sizes
                answers.extend(self.admin.describe_log_dirs(brokers=[node]))
            except Exception as e:
                log.debug("Console: DescribeLogDirs on broker %d: %s", node, e)
        for b in answers:
            for d in b.get("log_dirs") or []:
                for t in d.get("topics") or []:
                    for p in t.get("partitions") or []:
                        key = (t["name"], p["partition_index"], b["broker"])
                        out[key] = out.get(key, 0) + p["partition_size"]
        return out

    def overview(self) -> dict[str, JSON]:
        cluster = self.admin.describe_cluster()
        topics = self._topics()
        parts = [p for t in topics for p in t["partitions"]]
        brokers = []
        for b in sorted(cluster["brokers"], key=lambda b: b["broker_id"]):
            try:
                version = str(self.admin.get_broker_version_data(b["broker_id"])).strip("<>").split()[-1]
            except Exception:
                version = None
            brokers.append({"id": b["broker_id"], "host": b["host"], "port": b["port"], "rack": b.get("rack"),
                            "kafka_version": version,
                            "leaders": sum(1 for p in parts if p["leader_id"] == b["broker_id"])})
        return {
            "cluster_id": cluster["cluster_id"], "controller": cluster["controller_id"], "brokers": brokers,
            "samsa_version": samsa_version(), "topics": sum(1 for t in topics if not t["is_internal"]),
            "internal_topics": sum(1 for t in topics if t["is_internal"]), "partitions": len(parts),
            "under_replicated": sum(1 for p in parts if len(p["isr_nodes"]) < len(p["replica_nodes"])),
            "offline": sum(1 for p in parts if p["leader_id"] < 0),
            "rates": self.history[-1] if self.history else None,
        }

    def topics(self) -> list[dict[str, JSON]]:
        topics = self._topics()
        tps = [TopicPartition(t["name"], p["partition_index"]) for t in topics for p in t["partitions"]
               if p["leader_id"] >= 0]
        starts, ends = self._offsets(tps, OffsetSpec.EARLIEST), self._offsets(tps, OffsetSpec.LATEST)
        sizes = self._sizes()
        out = []
        for t in sorted(topics, key=lambda t: (t["is_internal"], t["name"])):
            ps = t["partitions"]
            name = t["name"]
            out.append({
                "name": name, "internal": t["is_internal"], "partitions": len(ps),
                "replication_factor": max((len(p["replica_nodes"]) for p in ps), default=0),
                "under_replicated": sum(1 for p in ps if len(p["isr_nodes"]) < len(p["replica_nodes"])),
                "offline": sum(1 for p in ps if p["leader_id"] < 0),
                "size": sum(sizes.get((name, p["partition_index"], p["leader_id"]), 0) for p in ps),
                "messages": sum(ends.get(TopicPartition(name, p["partition_index"]), 0)
                                - starts.get(TopicPartition(name, p["partition_index"]), 0) for p in ps),
                "messages_per_sec": self.topic_rates.get(name, 0.0),
            })
        return out

    def topic(self, name: str) -> dict[str, JSON]:
        t = self._topics([name])[0]
        tps = [TopicPartition(name, p["partition_index"]) for p in t["partitions"] if p["leader_id"] >= 0]
        starts, ends = self._offsets(tps, OffsetSpec.EARLIEST), self._offsets(tps, OffsetSpec.LATEST)
        sizes = self._sizes()
        parts = []
        for p in sorted(t["partitions"], key=lambda p: p["partition_index"]):
            tp = TopicPartition(name, p["partition_index"])
            parts.append({"partition": p["partition_index"], "leader": p["leader_id"],
                          "leader_epoch": p.get("leader_epoch"), "replicas": p["replica_nodes"],
                          "isr": p["isr_nodes"], "offline_replicas": p.get("offline_replicas") or [],
                          "log_start_offset": starts.get(tp), "log_end_offset": ends.get(tp),
                          "size": sizes.get((name, p["partition_index"], p["leader_id"])),
                          "error": error_name(p.get("error_code") or 0)})
        cfg = describe_configs(self.admin, 2, [name])[0]
        configs = [{"name": c["name"], "value": None if c["sensitive"] else c["value"], "source": c["source"],
                    "read_only": c["read_only"], "sensitive": c["sensitive"], "type": c["type"]}
                   for c in sorted(cfg["configs"], key=lambda c: c["name"])]
        tid = t.get("topic_id")
        return {"name": name, "topic_id": to_string(tid) if tid else "", "internal": t["is_internal"],
                "partitions": parts, "configs": configs, "messages_per_sec": self.topic_rates.get(name, 0.0)}

    def browse(self, topic: str, partition: int, offset: int | None, timestamp: int | None,
               limit: int) -> dict[str, JSON]:
        t = self._topics([topic])[0]
        if partition not in {p["partition_index"] for p in t["partitions"]}:
            raise ConsoleError(f"topic {topic!r} has no partition {partition}", 404)
        tp = TopicPartition(topic, partition)
        lo = self._offsets([tp], OffsetSpec.EARLIEST)[tp]
        hi = self._offsets([tp], OffsetSpec.LATEST)[tp]
        if timestamp is not None:
            found = self._offsets([tp], OffsetTimestamp(timestamp))[tp]
            start = found if found is not None and found >= 0 else hi
        elif offset is None:
            start = max(lo, hi - limit)  # newest page
        elif offset < 0:
            start = max(lo, hi + offset)  # -N: the last N
        else:
            start = max(lo, offset)
        records = messages.browse(self.consumer, topic, partition, start, hi, limit)
        nxt = records[-1]["offset"] + 1 if records else start
        return {"topic": topic, "partition": partition, "log_start_offset": lo, "log_end_offset": hi,
                "start_offset": start, "next_offset": nxt, "limit": limit, "messages": records}

    def groups(self) -> list[dict[str, JSON]]:
        out = []
        lags = (self.history[-1] or {}).get("group_lag", {}) if self.history else {}
        for g in sorted(self.admin.list_groups(), key=lambda g: g["group_id"]):
            out.append({"group": g["group_id"], "state": g.get("group_state"),
                        "protocol_type": g.get("protocol_type"), "type": g.get("group_type"),
                        "lag": lags.get(g["group_id"])})
        return out

    def group(self, group: str) -> dict[str, JSON]:
        d = describe_group(self.admin, group)
        if d.get("error"):
            raise ConsoleError(f"group {group!r}: {d['error']}", 404 if "NOT" in str(d["error"]) else 400)
        if d["state"] == "Dead" and not d["members"] and not d["offsets"]:
            raise ConsoleError(f"group {group!r} does not exist", 404)
        lags = [o["lag"] for o in d["offsets"] if o["lag"] is not None]
        d["total_lag"] = sum(lags) if lags else None
        d["lag_history"] = [{"t": t, "lag": lag} for t, lag in self.group_history.get(group, ())]
        return d

    def transactions(self) -> dict[str, JSON]:
        listed = [x for v in self.admin.list_transactions().values() for x in v]
        txns = []
        ids = [getattr(x, "transactional_id", None) for x in listed]
        described: dict[str, JSON] = {}
        for tid in [i for i in ids if i][:200]:
            try:  # one at a time: a transaction that ended since the listing must not hide the others
                described.update(self.admin.describe_transactions([tid]))
            except Exception as e:
                log.debug("Console: DescribeTransactions %r: %s", tid, e)
        for x in listed:
            tid = x.transactional_id
            d = described.get(tid)
            txns.append({
                "transactional_id": tid, "producer_id": x.producer_id, "state": str(getattr(x.state, "value",
                                                                                          x.state)),
                "producer_epoch": getattr(d, "producer_epoch", None),
                "timeout_ms": getattr(d, "transaction_timeout_ms", None),
                "start_time_ms": getattr(d, "transaction_start_time_ms", None),
                "coordinator": getattr(d, "coordinator_id", None),
                "partitions": sorted(f"{tp.topic}-{tp.partition}" for tp in getattr(d, "topic_partitions", None)
                                     or []),
            })
        return {"transactions": sorted(txns, key=lambda t: t["transactional_id"]),
                "producers": self._producers()}

    def _producers(self, max_partitions: int = 500) -> list[dict[str, JSON]]:
        tps = [TopicPartition(t["name"], p["partition_index"]) for t in self._topics() if not t["is_internal"]
               for p in t["partitions"] if p["leader_id"] >= 0][:max_partitions]
        out: list[dict[str, JSON]] = []
        if not tps:
            return out
        for tp, st in sorted(self.admin.describe_producers(tps).items()):
            for p in st.active_producers:
                out.append({"topic": tp.topic, "partition": tp.partition, "producer_id": p.producer_id,
                            "producer_epoch": p.producer_epoch, "last_sequence": p.last_sequence,
                            "last_timestamp": p.last_timestamp,
                            "current_transaction_start_offset": p.current_transaction_start_offset})
        return out

    def security(self) -> dict[str, JSON]:
        """ACLs (DescribeAcls, every binding) and client quotas (DescribeClientQuotas, every entity)."""
        acls: list[dict[str, JSON]] | None = None
        acl_note = None
        try:
            found, err = self.admin.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                            ResourcePatternFilter(ResourceType.ANY, None,
                                                                                  ACLResourcePatternType.ANY)))
            acls = sorted(({"principal": a.principal, "host": a.host, "operation": a.operation.name,
                            "permission": a.permission_type.name,
                            "resource_type": a.resource_pattern.resource_type.name,
                            "resource_name": a.resource_pattern.resource_name,
                            "pattern_type": a.resource_pattern.pattern_type.name} for a in found),
                          key=lambda a: (a["resource_type"], a["resource_name"], a["principal"], a["operation"]))
        except KafkaError as e:
            if type(e).__name__ != "SecurityDisabledError":
                raise
            acl_note = "No authorizer is configured (authorizer.class.name), so there are no ACLs to show."
        resp = send_request(self.admin, DescribeClientQuotasRequest(components=[], strict=False))
        quotas: list[dict[str, JSON]] | None = None
        quota_note = None
        if resp.error_code:
            quota_note = f"DescribeClientQuotas: {error_name(resp.error_code)} {resp.error_message or ''}".strip()
        else:
            quotas = []
            for entry in resp.entries or []:
                entity = ", ".join(f"{e.entity_type}={'<default>' if e.entity_name is None else e.entity_name}"
                                   for e in entry.entity)
                for v in entry.values:
                    quotas.append({"entity": entity, "key": v.key, "value": v.value})
            quotas.sort(key=lambda q: (q["entity"], q["key"]))
        return {"acls": acls, "acl_note": acl_note, "quotas": quotas, "quota_note": quota_note}

    # --- schema registry (Confluent's REST API, not the Kafka protocol) ----------------------

    def _registry_get(self, path: str) -> JSON:
        req = urllib.request.Request(self.schema_registry_url + path,
                                     headers={"Accept": "application/vnd.schemaregistry.v1+json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            try:
                doc = json.loads(e.read())
                raise ConsoleError(f"schema registry: {doc.get('error_code')}: {doc.get('message')}",
                                   404 if e.code == 404 else 502) from None
            except ValueError:
                raise ConsoleError(f"schema registry: HTTP {e.code}", 502) from None
        except (urllib.error.URLError, OSError) as e:
            raise ConsoleError(f"cannot reach the schema registry at {self.schema_registry_url}: {e}", 502) from None

    def schemas(self, max_subjects: int = 500) -> dict[str, JSON]:
        """Subjects with their latest version, id, type and compatibility level; the global level and mode."""
        if not self.schema_registry_url:
            return {"url": None, "subjects": [], "note": "No schema registry: set schema.registry.listeners on "
                                                          "this broker, or console.schema.registry.url."}
        names = self._registry_get("/subjects")
        subjects = []
        for name in sorted(names)[:max_subjects]:
            q = quote(name, safe="")
            latest = self._registry_get(f"/subjects/{q}/versions/latest")
            subjects.append({"subject": name, "versions": self._registry_get(f"/subjects/{q}/versions"),
                             "latest_version": latest["version"], "id": latest["id"],
                             "schema_type": latest.get("schemaType", "AVRO"),
                             "compatibility": self._registry_get(f"/config/{q}?defaultToGlobal=true")
                             .get("compatibilityLevel")})
        return {"url": self.schema_registry_url, "subjects": subjects, "truncated": len(names) > max_subjects,
                "compatibility": self._registry_get("/config").get("compatibilityLevel"),
                "mode": self._registry_get("/mode").get("mode"), "note": None}

    def subject(self, name: str) -> dict[str, JSON]:
        """Every live version of a subject with its schema text and references."""
        if not self.schema_registry_url:
            raise ConsoleError("No schema registry is configured for the console", 404)
        q = quote(name, safe="")
        versions = [self._registry_get(f"/subjects/{q}/versions/{v}")
                    for v in self._registry_get(f"/subjects/{q}/versions")]
        level = self._registry_get(f"/config/{q}?defaultToGlobal=true").get("compatibilityLevel")
        return {"subject": name, "compatibility": level, "versions": versions}

    # --- sampling -------------------------------------------------------------------------

    def _scrape(self) -> tuple[float, float] | None:
        """All-topics bytes in/out counters summed over the brokers' /metrics, or None if any fails."""
        if not self.metrics_urls:
            return None
        b_in = b_out = 0.0
        for url in self.metrics_urls:
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    text = resp.read(64 * 1024 * 1024).decode("utf-8", "replace")
            except (OSError, ValueError) as e:
                log.debug("Console: cannot scrape %s: %s", url, e)
                return None
            for fam in text_string_to_metric_families(text):
                for smp in fam.samples:
                    if "topic" in smp.labels:
                        continue
                    if smp.name == METRIC_BYTES_IN:
                        b_in += smp.value
                    elif smp.name == METRIC_BYTES_OUT:
                        b_out += smp.value
        return b_in, b_out

    def sample(self) -> None:
        """One sample: end offsets, leader sizes and group offsets; appends rates to the history."""
        now = time.time()
        topics = self._topics()
        leaders = {(t["name"], p["partition_index"]): p["leader_id"] for t in topics for p in t["partitions"]}
        tps = [TopicPartition(n, p) for (n, p), leader in leaders.items() if leader >= 0]
        ends = {(tp.topic, tp.partition): o for tp, o in self._offsets(tps, OffsetSpec.LATEST).items()}
        metrics = self._scrape()
        starts: dict[tuple[str, int], int] = {}
        sizes: dict[tuple[str, int], int] = {}
        if metrics is None:  # only the protocol estimate of bytes in/out needs sizes and log starts
            starts = {(tp.topic, tp.partition): o for tp, o in self._offsets(tps, OffsetSpec.EARLIEST).items()}
            all_sizes = self._sizes()
            sizes = {k: all_sizes.get((k[0], k[1], leader), 0) for k, leader in leaders.items()}
        committed: dict[str, dict[tuple[str, int], int]] = {}
        for g in self.admin.list_groups()[:MAX_SAMPLED_GROUPS]:
            gid = g["group_id"]
            offs = self.admin.list_group_offsets({gid: None}).get(gid, {})
            committed[gid] = {(tp.topic, tp.partition): o.offset for tp, o in offs.items() if o.offset >= 0}
        group_lag = {g: sum(max(0, ends.get(k, o) - o) for k, o in c.items()) for g, c in committed.items()}
        for g, lag in group_lag.items():
            self.group_history.setdefault(g, deque(maxlen=HISTORY)).append((now, lag))
        for g in list(self.group_history):
            if g not in group_lag:
                del self.group_history[g]
        raw = Sample(t=now, ends=ends, starts=starts, sizes=sizes, committed=committed, metrics=metrics)
        prev, self._last = self._last, raw
        point: dict[str, JSON] = {"t": now, "bytes_in": 0.0, "bytes_out": 0.0, "messages_in": 0.0,
                                 "group_lag": group_lag}
        if prev is not None and now > prev.t:
            dt = now - prev.t
            rates: dict[str, float] = {}
            b_in: float = 0
            for k, end in ends.items():
                d_msgs = max(0, end - prev.ends.get(k, end))
                rates[k[0]] = rates.get(k[0], 0.0) + d_msgs / dt
                b_in += max(0, sizes.get(k, 0) - prev.sizes.get(k, sizes.get(k, 0)))
            b_out = 0.0
            for g, c in committed.items():
                for k, o in c.items():
                    before = prev.committed.get(g, {}).get(k)
                    records = ends.get(k, 0) - starts.get(k, 0)
                    if before is None or o <= before or records <= 0:
                        continue
                    b_out += (o - before) * sizes.get(k, 0) / records  # records x mean record size
            self.topic_rates = {t: round(r, 2) for t, r in rates.items()}
            source = "protocol"
            if raw.metrics is not None and prev.metrics is not None:
                # exact counters from the brokers' metrics endpoints (a restart resets them: count 0)
                source = "metrics"
                b_in = max(0.0, raw.metrics[0] - prev.metrics[0])
                b_out = max(0.0, raw.metrics[1] - prev.metrics[1])
            point.update(bytes_in=round(b_in / dt, 1), bytes_out=round(b_out / dt, 1),
                         messages_in=round(sum(rates.values()), 2), source=source)
            self.history.append(point)

    # --- writes ---------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     configs: dict[str, str]) -> dict[str, JSON]:
        res = self.admin.create_topics({name: {"num_partitions": partitions, "replication_factor":
                                               replication_factor, "configs": configs}}, raise_errors=False)
        t = res["topics"][0]
        if t["error_code"]:
            raise ConsoleError(f"{error_name(t['error_code'])}: {t.get('error_message') or ''}".strip(": "))
        return {"topic": name, "partitions": t.get("num_partitions"), "replication_factor":
                t.get("replication_factor")}

    def add_partitions(self, name: str, count: int) -> dict[str, JSON]:
        self._topics([name])
        res = self.admin.create_partitions({name: count}, raise_errors=False)
        r = res.results[0]
        if r.error_code:
            raise ConsoleError(f"{error_name(r.error_code)}: {r.error_message or ''}".strip(": "))
        return {"topic": name, "partitions": count}

    def alter_configs(self, name: str, set_: dict[str, str], delete: list[str]) -> dict[str, JSON]:
        self._topics([name])
        entries = [(k, 0, str(v)) for k, v in set_.items()] + [(k, 1, None) for k in delete]
        resp = send_request(self.admin, IncrementalAlterConfigsRequest(resources=[(2, name, entries)],
                                                                       validate_only=False))
        r = resp.responses[0]
        if r.error_code:
            raise ConsoleError(f"{error_name(r.error_code)}: {r.error_message or ''}".strip(": "))
        return {"topic": name, "set": set_, "deleted": delete}

    def delete_records(self, name: str, partition: int, before: int) -> dict[str, JSON]:
        tp = TopicPartition(name, partition)
        res = self.admin.delete_records({tp: before})
        r = res.get(tp) or {}
        low = r.get("low_watermark") if isinstance(r, dict) else getattr(r, "low_watermark", None)
        return {"topic": name, "partition": partition, "log_start_offset": low}

    def reset_offsets(self, group: str, topic: str, partitions: list[int] | None, to: str, value: int | None,
                      execute: bool) -> dict[str, JSON]:
        """Plan (and with ``execute`` apply) new committed offsets, as kafka-consumer-groups.sh does."""
        if to not in ("earliest", "latest", "offset", "timestamp", "shift"):
            raise ConsoleError(f"unknown reset target {to!r}: earliest, latest, offset, timestamp or shift")
        if to in ("offset", "timestamp", "shift") and value is None:
            raise ConsoleError(f"reset to {to} needs a value")
        t = self._topics([topic])[0]
        known = sorted(p["partition_index"] for p in t["partitions"])
        chosen = known if not partitions else partitions
        bad = sorted(set(chosen) - set(known))
        if bad:
            raise ConsoleError(f"topic {topic!r} has no partition(s) {bad}", 404)
        desc, _ = describe_groups_raw(self.admin, group)
        state = desc.get("group_state")
        if execute and state not in ("Empty", "Dead"):
            raise ConsoleError(f"Assignments can only be reset if the group '{group}' is inactive, but the "
                               f"current state is {state}.", 409)
        keys = [TopicPartition(topic, p) for p in chosen]
        current = {tp: o.offset for tp, o in self.admin.list_group_offsets({group: None}).get(group, {}).items()}
        lo, hi = self._offsets(keys, OffsetSpec.EARLIEST), self._offsets(keys, OffsetSpec.LATEST)
        by_time = self._offsets(keys, OffsetTimestamp(value)) if to == "timestamp" and value is not None else {}
        plan: dict[TopicPartition, int] = {}
        rows = []
        for k in keys:
            cur = current.get(k)
            cur = cur if cur is not None and cur >= 0 else None
            if to == "earliest":
                target = lo[k]
            elif to == "latest":
                target = hi[k]
            elif to == "offset":
                target = int(value or 0)
            elif to == "shift":
                target = (cur if cur is not None else hi[k]) + int(value or 0)
            else:
                found = by_time.get(k)
                target = found if found is not None and found >= 0 else hi[k]
            target = max(lo[k], min(hi[k], target))
            plan[k] = target
            rows.append({"topic": topic, "partition": k.partition, "previous_offset": cur, "new_offset": target})
        if execute:
            res = self.admin.alter_group_offsets(group, {k: OffsetAndMetadata(o, "", None) for k, o in plan.items()})
            errs = {k.partition: (None if e.errno == 0 else e.__name__) for k, e in res.items()}
            for r in rows:
                r["error"] = errs.get(r["partition"])
        return {"group": group, "state": state, "dry_run": not execute, "offsets": rows}
