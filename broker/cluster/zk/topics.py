"""The topic registry of a broker in a cluster: ZooKeeper is the source of truth.

Theory of operation: every broker keeps the same :class:`~broker.cluster.metadata.TopicRegistry` view
as the single broker (name, topic id, partition count, config overrides), but fills it from
``/brokers/topics`` and ``/config/topics`` and keeps it current with ZooKeeper watches:
the children of ``/brokers/topics`` (topics created and deleted), each topic's assignment
(partitions added) and ``/config/changes`` (config overrides altered, Kafka's
``ZkConfigChangeNotification``). Mutations made here (CreateTopics, CreatePartitions,
AlterConfigs, DeleteTopics on this broker) are written to ZooKeeper as Kafka's
``AdminZkClient`` writes them and applied to the local view at once, so the request that made
them sees them; the other brokers see them through their watches, and the controller reacts to
the assignment znodes by electing leaders and sending LeaderAndIsr.

Replica placement is Kafka's ``assignReplicasToBrokers``: a random starting broker, the first
replicas round-robin over the live brokers, the followers shifted by a per-round increment, so
leaders and followers spread evenly. When every live broker has a ``broker.rack`` the rack-aware
variant is used (Kafka's ``assignReplicasToBrokersRackAware``): brokers are listed alternating
between racks, and each follower goes to the next broker whose rack holds no replica of the
partition yet (until every rack has one), so losing a rack loses at most one replica each.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import random
import uuid
from collections.abc import Callable, Coroutine

from protocol.errors import ErrorCode, KafkaError

from .. import zk_data as zd
from ..metadata import TopicInfo, TopicRegistry, topic_id_base64, validate_topic_name
from .client import DEFAULT_REQUEST_TIMEOUT_S, KafkaZkClient, TopicExists

log = logging.getLogger("samsa.metadata")


def topic_id_from_base64(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def _check_replication_factor(replication_factor: int, brokers: int) -> None:
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > brokers:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Replication factor: {replication_factor} larger than available brokers: {brokers}.")


def _start_and_shift(n: int, start_index: int | None, shift: int | None) -> tuple[int, int]:
    """Kafka's random starting broker and follower shift (fixed ones for tests)."""
    return (random.randrange(n) if start_index is None else start_index,
            random.randrange(n) if shift is None else shift)


def assign_replicas(brokers: list[int], num_partitions: int, replication_factor: int, *,
                    start_partition: int = 0, start_index: int | None = None,
                    shift: int | None = None) -> dict[int, list[int]]:
    """Kafka's rack-unaware replica placement (``AdminUtils.assignReplicasToBrokers``)."""
    _check_replication_factor(replication_factor, len(brokers))
    ids = sorted(brokers)
    n = len(ids)
    start, next_shift = _start_and_shift(n, start_index, shift)
    out: dict[int, list[int]] = {}
    current = start_partition
    for _ in range(num_partitions):
        if current > 0 and current % n == 0:
            next_shift += 1
        first = (current + start) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[(first + 1 + (next_shift + j) % (n - 1)) % n] if n > 1 else ids[first])
        out[current] = replicas
        current += 1
    return out


def rack_alternated(racks: dict[int, str]) -> list[int]:
    """Brokers in Kafka's rack-alternating order: rack1's first, rack2's first, ..., rack1's second ..."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(racks):
        by_rack.setdefault(racks[b], []).append(b)
    ordered = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    for i in range(max(len(x) for x in ordered)):
        out += [x[i] for x in ordered if i < len(x)]
    return out


def assign_replicas_rack_aware(racks: dict[int, str], num_partitions: int, replication_factor: int, *,
                               start_partition: int = 0, start_index: int | None = None,
                               shift: int | None = None) -> dict[int, list[int]]:
    """Kafka's ``assignReplicasToBrokersRackAware``: at most one replica per rack until every rack has one."""
    _check_replication_factor(replication_factor, len(racks))
    arranged = rack_alternated(racks)
    n = len(arranged)
    num_racks = len(set(racks.values()))
    start, next_shift = _start_and_shift(n, start_index, shift)
    out: dict[int, list[int]] = {}
    for current in range(start_partition, start_partition + num_partitions):
        if current > 0 and current % n == 0:
            next_shift += 1
        first = (current + start) % n
        leader = arranged[first]
        replicas, with_racks, with_brokers = [leader], {racks[leader]}, {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                b = arranged[(first + 1 + (next_shift + k) % (n - 1)) % n] if n > 1 else leader
                k += 1
                if (racks[b] not in with_racks or len(with_racks) == num_racks) and \
                        (b not in with_brokers or len(with_brokers) == n):
                    replicas.append(b)
                    with_racks.add(racks[b])
                    with_brokers.add(b)
                    break
        out[current] = replicas
    return out


class ZkTopicRegistry(TopicRegistry):
    """A TopicRegistry backed by ZooKeeper; see the module docstring."""

    def __init__(self, zk: KafkaZkClient, default_rf: int, internal_rf: dict[str, int] | None = None) -> None:
        super().__init__(path=None)  # type: ignore[arg-type]  # nothing persisted locally
        self.zk = zk
        self.default_rf = default_rf
        self.internal_rf = internal_rf or {}
        self.assignments: dict[str, zd.TopicAssignment] = {}
        self._seen_changes: set[str] = set()
        self._watched: set[str] = set()
        self._listed: set[str] = set()  # the children of /brokers/topics, as last seen
        self._reads: set[asyncio.Task[None]] = set()
        # (entity type, name) observers of /config/changes for entities other than topics
        self.entity_config_listeners: list[Callable[[str, str], object]] = []

    # --- loading and watching -------------------------------------------------------------------
    def load(self) -> None:
        """At start-up, before any client is served: every topic, read in one go."""
        self._listed = set(self.zk.get_all_topics())
        for name in sorted(self._listed):
            self._refresh_topic(name, notify=False)
        log.info("Loaded metadata for %d topics from ZooKeeper", len(self._topics))

    def _persist(self) -> None:  # ZooKeeper is the store
        pass

    def start_watches(self) -> None:
        self._seen_changes = set(self.zk.children(zd.CONFIG_CHANGES))
        self.zk.watch_children(zd.BROKER_TOPICS, self._on_topics_changed)
        self.zk.watch_children(zd.CONFIG_CHANGES, self._on_config_changes)

    # The watches fire on the event loop; what they need to read from ZooKeeper is read on a
    # ZooKeeper request thread and applied back here (a slow ZooKeeper never stalls the loop).
    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._reads.add(task)
        task.add_done_callback(self._reads.discard)

    async def _refresh_listed(self, name: str, data: bytes | None = None) -> None:
        try:
            got = await self.zk.call(self._read_topic, name, data)
        except KafkaError as e:
            log.warning("Could not read topic %s from ZooKeeper: %s", name, e.message)
            return
        if got is not None and name in self._listed:  # (not deleted while we read)
            self._apply_topic(name, got[0], got[1], notify=True)

    def _on_topics_changed(self, names: list[str]) -> None:
        current = set(names)
        self._listed = current
        for name in sorted(current - set(self._topics)):
            self._spawn(self._refresh_listed(name))
            self._watch_topic(name)
        for name in sorted(set(self._topics) - current):
            self._apply_deleted(name)
        for name in sorted(current & set(self._topics)):
            self._watch_topic(name)

    def _watch_topic(self, name: str) -> None:
        if name in self._watched:
            return
        self._watched.add(name)

        def changed(data: bytes | None) -> None:
            if data is None:
                self._watched.discard(name)
                return
            if name in self._topics:
                self._spawn(self._refresh_listed(name, data))
        self.zk.watch_data(zd.topic_path(name), changed)

    def _on_config_changes(self, names: list[str]) -> None:
        new = [n for n in names if n not in self._seen_changes]
        self._seen_changes.update(new)
        if new:
            self._spawn(self._apply_config_changes(new))

    def _read_config_change(self, n: str) -> tuple[str, str, dict[str, str] | None] | None:
        """On a ZooKeeper request thread: (entity type, name, a topic's configs) of one notice."""
        got = self.zk.get(f"{zd.CONFIG_CHANGES}/{n}")
        if got is None:
            return None
        kind, _, name = zd.decode_config_change(got[0]).partition("/")
        return kind, name, self.zk.get_entity_config("topics", name) if kind == "topics" else None

    async def _apply_config_changes(self, notices: list[str]) -> None:
        for n in notices:
            try:
                got = await self.zk.call(self._read_config_change, n)
            except KafkaError as e:
                log.warning("Could not read config change notice %s from ZooKeeper: %s", n, e.message)
                continue
            if got is None:
                continue
            kind, name, configs = got
            info = self._topics.get(name) if kind == "topics" else None
            if info is not None and configs is not None and configs != info.configs:
                info.configs = configs
                self._notify("configs", name)
            for fn in self.entity_config_listeners:
                fn(kind, name)

    def _read_topic(self, name: str, data: bytes | None = None) -> tuple[zd.TopicAssignment, dict[str, str]] | None:
        a = zd.decode_topic_assignment(data) if data is not None else self.zk.get_topic_assignment(name)
        if a is None:
            return None
        return a, self.zk.get_entity_config("topics", name)

    def _refresh_topic(self, name: str, *, notify: bool, data: bytes | None = None) -> TopicInfo | None:
        got = self._read_topic(name, data)
        return None if got is None else self._apply_topic(name, got[0], got[1], notify=notify)

    def _apply_topic(self, name: str, a: zd.TopicAssignment, configs: dict[str, str], *,
                     notify: bool) -> TopicInfo:
        tid = topic_id_from_base64(a.topic_id) if a.topic_id else uuid.uuid5(uuid.NAMESPACE_OID, name)
        self.assignments[name] = a
        info = self._topics.get(name)
        if info is None:
            info = TopicInfo(name, tid, len(a.partitions), configs)
            self._topics[name] = info
            self._by_id[tid] = info
            if notify:
                self._notify("created", name)
        elif len(a.partitions) > info.num_partitions:
            info.num_partitions = len(a.partitions)
            if notify:
                self._notify("partitions", name)
        return info

    def _apply_deleted(self, name: str) -> None:
        info = self._topics.pop(name, None)
        self.assignments.pop(name, None)
        self._watched.discard(name)
        if info is not None:
            self._by_id.pop(info.topic_id, None)
            log.info("Topic %s (topic ID %s) was deleted", name, topic_id_base64(info.topic_id))
            self._notify("deleted", name)

    @staticmethod
    def _place(brokers: dict[int, zd.BrokerInfo], num_partitions: int, rf: int,
               start_partition: int = 0) -> dict[int, list[int]]:
        """Replica placement over the registered brokers (rack-aware when every one has a rack),
        as Kafka's AdminZkClient reads them from ``/brokers/ids``."""
        racks = {b: info.rack for b, info in brokers.items()}
        if racks and all(racks.values()):
            return assign_replicas_rack_aware({b: str(r) for b, r in racks.items()}, num_partitions, rf,
                                              start_partition=start_partition)
        return assign_replicas(sorted(brokers), num_partitions, rf, start_partition=start_partition)

    # --- mutations (AdminZkClient) ----------------------------------------------------------------
    # Each runs its ZooKeeper reads and writes on a ZooKeeper request thread (KafkaZkClient.call,
    # bounded by ``timeout``) and applies the result here, on the event loop, which owns the view.
    def create(self, name: str, num_partitions: int, configs: dict[str, str] | None = None) -> TopicInfo:
        raise TypeError("a ZooKeeper-backed topic is created with create_topic() (awaited)")

    def delete(self, name: str) -> TopicInfo:
        raise TypeError("a ZooKeeper-backed topic is deleted with delete_topic() (awaited)")

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        raise TypeError("a ZooKeeper-backed topic's configs are set with set_topic_configs() (awaited)")

    def add_partitions(self, name: str, new_total: int, assignment: dict[int, list[int]] | None = None) -> None:
        raise TypeError("a ZooKeeper-backed topic grows with add_topic_partitions() (awaited)")

    async def create_topic(self, name: str, num_partitions: int, configs: dict[str, str] | None = None, *,
                           replication_factor: int | None = None, assignment: dict[int, list[int]] | None = None,
                           timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> TopicInfo:
        validate_topic_name(name)
        if name in self._topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if assignment is None and num_partitions <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        rf = replication_factor if replication_factor and replication_factor > 0 else \
            self.internal_rf.get(name, self.default_rf)
        tid = uuid.uuid4()
        configs = dict(configs or {})
        a = await self.zk.call(self._create_in_zk, name, num_partitions, rf, assignment, tid, configs,
                               timeout=timeout)
        info = self._topics.get(name)
        if info is None:  # (the /brokers/topics watch may have applied it first)
            info = TopicInfo(name, tid, len(a.partitions), configs)
            self._topics[name] = info
            self._by_id[tid] = info
            self.assignments[name] = a
            self._notify("created", name)
        log.info("Created topic %s with topic ID %s, %d partitions, replica assignment %s and configs %s",
                 name, topic_id_base64(tid), len(a.partitions), dict(sorted(a.partitions.items())),
                 configs or "{}")
        return info

    def _create_in_zk(self, name: str, num_partitions: int, rf: int, assignment: dict[int, list[int]] | None,
                      tid: uuid.UUID, configs: dict[str, str]) -> zd.TopicAssignment:
        """On a ZooKeeper request thread: check, place the replicas, write the topic znodes."""
        if self.zk.get_topic_assignment(name) is not None:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if assignment is None:
            assignment = self._place(self.zk.get_all_brokers(), num_partitions, rf)
        else:
            live = set(self.zk.get_all_brokers())
            for p, replicas in assignment.items():
                if len(set(replicas)) != len(replicas) or not replicas:
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Duplicate or empty replicas in the assignment of partition {p}")
                if not set(replicas) <= live:
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Unknown broker ids in the assignment of partition {p}: {replicas}")
        a = zd.TopicAssignment(topic_id_base64(tid), dict(assignment))
        try:
            self.zk.create_topic(name, a, configs)
        except TopicExists:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None
        return a

    async def delete_topic(self, name: str, timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        await self.zk.call(self.zk.queue_topic_deletion, name, timeout=timeout)
        log.info("Topic %s queued for deletion (/admin/delete_topics)", name)
        return info

    async def set_topic_configs(self, name: str, configs: dict[str, str],
                                timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> None:
        await self.zk.call(lambda: self.zk.set_entity_config("topics", name, dict(configs), notify=True),
                           timeout=timeout)
        info = self._topics.get(name)
        if info is not None:
            info.configs = dict(configs)
            self._notify("configs", name)

    async def refresh(self, name: str, timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> TopicInfo | None:
        """Read one topic from ZooKeeper now (a LeaderAndIsr may arrive before the watch fires)."""
        got = await self.zk.call(self._read_topic, name, timeout=timeout)
        if got is None:
            return None
        return self._apply_topic(name, got[0], got[1], notify=True)

    def replication_factor(self, name: str) -> int:
        """Replicas per partition of ``name``, as its partition 0 has them in ZooKeeper (Kafka checks
        a manual assignment of new partitions against the existing ones)."""
        a = self.assignments.get(name)  # every known topic's assignment is cached (no ZooKeeper read)
        if a is None or not a.partitions:
            return self.default_rf
        return len(a.partitions.get(0) or next(iter(a.partitions.values())))

    async def add_topic_partitions(self, name: str, new_total: int, assignment: dict[int, list[int]] | None = None,
                                   timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> None:
        info = self._topics[name]
        current = info.num_partitions
        if new_total <= current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than or "
                             f"equal to the requested {new_total}.")
        a, extra = await self.zk.call(self._add_partitions_in_zk, name, current, new_total, assignment,
                                      timeout=timeout)
        self.assignments[name] = a
        if new_total > info.num_partitions:
            info.num_partitions = new_total
            self._notify("partitions", name)
        log.info("Added partitions to topic %s: now %d, new replicas %s", name, new_total, extra)

    def _add_partitions_in_zk(self, name: str, current: int, new_total: int,
                              assignment: dict[int, list[int]] | None
                              ) -> tuple[zd.TopicAssignment, dict[int, list[int]]]:
        """On a ZooKeeper request thread: place the new partitions' replicas and write them."""
        a = self.zk.get_topic_assignment(name) or self.assignments[name]
        rf = len(next(iter(a.partitions.values()))) if a.partitions else self.default_rf
        extra = assignment or self._place(self.zk.get_all_brokers(), new_total - current, rf,
                                          start_partition=current)
        a = zd.TopicAssignment(a.topic_id, {**a.partitions, **extra}, a.adding, a.removing)
        self.zk.set_topic_assignment(name, a)
        return a, extra
