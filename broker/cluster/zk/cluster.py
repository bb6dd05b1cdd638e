"""A broker's membership of a ZooKeeper-mode cluster (the ZooKeeper half of Kafka's ``KafkaServer``).

Start-up, in Kafka's order: connect to ZooKeeper (retrying until
``zookeeper.connection.timeout.ms``, then failing with a clear message), agree on the cluster
id (``/cluster/id``), load the topics, register ``/brokers/ids/<broker.id>`` (an id held by
another live broker stops start-up: nothing local is touched), start the controller elector,
the replica fetchers and the ISR-shrink task. The broker serves only what the controller's
LeaderAndIsr and UpdateMetadata tell it.

On a lost ZooKeeper session the broker keeps serving what it leads (its partitions' state
znodes are untouched, and the ISR writes it makes are conditional, so it cannot overwrite a
newer decision), re-registers as soon as a new session exists and runs for controller again;
a controller that lost its session has already been replaced and resigns.

Shutdown is *controlled* (``controlled.shutdown.enable``): the broker asks the controller to
move its leaderships away (ControlledShutdown, retried ``controlled.shutdown.max.retries``
times) before it closes its listeners, so producers and consumers move on without errors.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import MetadataRequest

from protocol.errors import ErrorCode, KafkaError
from protocol.inter_broker import (
    CONTROLLED_SHUTDOWN_VERSION,
    ControlledShutdownRequest,
    UpdateMetadataRequest,
)
from txn.producer_ids import MAX_PRODUCER_ID, PRODUCER_ID_BLOCK_SIZE, ProducerIdManager

from ...replica.replica_manager import Partition
from .. import features
from .. import zk_data as zd
from ..controller.controller import KafkaController
from ..interbroker import BrokerClient
from ..metadata import TopicInfo
from ..metadata_cache import MetadataCache, PartitionMetadata
from ..replication.fetcher import FollowerBroker, ReplicaFetcherManager
from ..support import (
    MetadataSupport,
    PartitionResult,
    Reassignment,
    advertised_broker_info,
    not_controller,
)
from .client import DEFAULT_REQUEST_TIMEOUT_S, BadVersionError, KafkaZkClient
from .topics import ZkTopicRegistry

log = logging.getLogger("samsa.cluster")

# How long a leader gathers its ISR changes into one /isr_change_notification (Kafka waits 2.5 s
# to 60 s; a shorter wait keeps Metadata fresh and still folds a rejoin's burst into one znode)
ISR_CHANGE_PROPAGATION_S = 0.5


class ZkProducerIdManager(ProducerIdManager):
    """Producer-id blocks claimed from ``/latest_producer_id_block``: never the same id on two brokers.

    As Kafka's RPCProducerIdManager, the next block is fetched in the background (on a ZooKeeper
    request thread) once 90 % of the current one is used, so that handing out an id never waits
    for ZooKeeper on the event loop; with no block at hand ``generate_producer_id`` raises the
    retriable COORDINATOR_LOAD_IN_PROGRESS and :meth:`ready` awaits one."""

    def __init__(self, zk: KafkaZkClient, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.block_size = PRODUCER_ID_BLOCK_SIZE
        self._lock = threading.Lock()
        self._next, self._block_end = 0, -1
        self._prefetched: tuple[int, int] | None = None
        self._fetching: Future[tuple[int, int]] | None = None

    def _claim(self) -> tuple[int, int]:  # a ZooKeeper request thread
        start, end = self.zk.allocate_producer_id_block(self.broker_id, self.block_size)
        log.info("Claimed producer id block %d-%d", start, end)
        return start, end

    def _prefetch(self) -> Future[tuple[int, int]]:
        with self._lock:
            fut = self._fetching
            if fut is not None:
                return fut
            fut = self._fetching = self.zk.submit(self._claim)
        # Outside the lock: a claim that already finished (the request thread can win the race to
        # here) runs _fetched at once on this thread, and _fetched takes the lock. Under the lock
        # that deadlocked the event loop right after "Claimed producer id block" at start-up.
        fut.add_done_callback(self._fetched)
        return fut

    def _fetched(self, fut: Future[tuple[int, int]]) -> None:
        with self._lock:
            self._fetching = None
            try:
                self._prefetched = fut.result()
            except Exception as e:
                log.warning("Could not claim a producer id block from ZooKeeper: %s", e or type(e).__name__)

    async def ready(self, timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> None:
        """Until an id can be handed out without ZooKeeper (ZooKeeperRequestTimeout after ``timeout``)."""
        with self._lock:
            if self._next <= self._block_end or self._prefetched is not None:
                return
        try:
            await asyncio.wait_for(asyncio.wrap_future(self._prefetch()), timeout)
        except Exception as e:  # not in time, or ZooKeeper refused: producers retry this code
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                             f"no producer id block from ZooKeeper: {e or type(e).__name__}") from None

    def generate_producer_id(self) -> int:
        prefetch = False
        with self._lock:
            if self._next > self._block_end:
                if self._prefetched is None:
                    raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                     "waiting for a producer id block from ZooKeeper")
                start, end = self._prefetched
                self._prefetched = None
                if end > MAX_PRODUCER_ID:
                    raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "producer ids exhausted")
                self._next, self._block_end = start, end
            pid = self._next
            self._next += 1
            used = self.block_size - (self._block_end - pid)
            prefetch = self._prefetched is None and self._fetching is None and used >= self.block_size * 0.9
        if prefetch:
            self._prefetch()
        return pid

    generate = generate_producer_id


class ZkMetadataSupport(MetadataSupport):
    """Everything a broker does because it is part of a ZooKeeper-mode cluster (Kafka's ZkSupport)."""

    def __init__(self, broker: FollowerBroker) -> None:
        self.broker = broker
        cfg = broker.config
        self.zk = KafkaZkClient(str(cfg["zookeeper.connect"]), session_timeout_ms=cfg.int("zookeeper.session.timeout.ms"),
                                connection_timeout_ms=cfg.int("zookeeper.connection.timeout.ms"))
        self.cache = MetadataCache(broker.broker_id)
        internal_rf = {"__consumer_offsets": cfg.int("offsets.topic.replication.factor"),
                       "__transaction_state": cfg.int("transaction.state.log.replication.factor"),
                       "__share_group_state": int(str(cfg.get("share.coordinator.state.topic.replication.factor")
                                                      or 3))}
        self.broker_id: int = broker.broker_id
        self.topics: ZkTopicRegistry = ZkTopicRegistry(self.zk, cfg.int("default.replication.factor"), internal_rf)
        self.entity_config_listeners = self.topics.entity_config_listeners
        self._producer_ids = ZkProducerIdManager(self.zk, broker.broker_id)
        self.controller: KafkaController | None = None
        self.fetchers = ReplicaFetcherManager(broker)
        self.broker_epoch = -1
        self._tasks: list[asyncio.Task[None]] = []
        self._clients: dict[int, BrokerClient] = {}
        self._isr_changes_pending: set[tuple[str, int]] = set()
        self._isr_flush: asyncio.TimerHandle | None = None
        # The leader's ISR writes (Kafka's AlterPartitionManager has one sender thread): threads of
        # their own, so that a hung ZooKeeper holding them never starves the loop's default executor.
        self._isr_executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="isr-writer")
        self._isr_executor_stopped = False

    # --- MetadataSupport: the brokers ---------------------------------------------------------
    def live_brokers(self) -> list[zd.BrokerInfo]:
        if not self.cache.brokers:  # no UpdateMetadata yet: this broker alone
            return [self.broker_info()]
        return sorted(self.cache.brokers.values(), key=lambda b: b.id)

    def live_broker(self, broker_id: int) -> zd.BrokerInfo | None:
        return self.cache.brokers.get(broker_id)

    def controller_id(self) -> int:
        return self.cache.controller_id

    async def registered_broker_ids(self) -> list[int]:
        """The registered brokers, read from ZooKeeper as Kafka's AdminZkClient does for replica
        placement (the metadata cache can trail a broker's (re)registration by a moment);
        REQUEST_TIMED_OUT when ZooKeeper does not answer in time."""
        return sorted(int(b) for b in await self.zk.call(self.zk.children, zd.BROKER_IDS))

    async def is_cluster_member(self, broker_id: int) -> bool:
        if broker_id < 0:
            return False
        if broker_id in self.cache.brokers:
            return True
        # not in our view yet (we have just started, or it has just joined): ask ZooKeeper
        try:
            return await self.zk.call(self.zk.get, zd.broker_path(broker_id)) is not None
        except Exception as e:
            log.info("Cannot tell whether broker %d is registered: %s", broker_id, e)
            return False

    # --- MetadataSupport: partitions ----------------------------------------------------------
    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        return self.cache.partition(topic, partition)

    @property
    def clustered(self) -> bool:
        return True

    @property
    def zookeeper(self) -> KafkaZkClient:
        return self.zk

    def apply_update_metadata(self, req: UpdateMetadataRequest) -> None:
        self.cache.apply_update_metadata(req)

    def controller_metrics(self) -> tuple[int, int]:
        c = self.controller
        if c is None or not c.is_active:
            return 0, 0
        return 1, c.offline_partition_count

    # --- MetadataSupport: topics --------------------------------------------------------------
    async def create_topic(self, name: str, num_partitions: int, configs: dict[str, str], *,
                           replication_factor: int = -1,
                           assignment: dict[int, list[int]] | None = None) -> TopicInfo:
        return await self.topics.create_topic(name, num_partitions, configs, replication_factor=replication_factor,
                                              assignment=assignment)

    async def delete_topic(self, name: str) -> TopicInfo:
        return await self.topics.delete_topic(name)

    async def add_partitions(self, name: str, new_total: int, assignment: dict[int, list[int]] | None) -> None:
        await self.topics.add_topic_partitions(name, new_total, assignment)

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        await self.topics.set_topic_configs(name, configs)

    async def refresh_topic(self, name: str) -> TopicInfo | None:
        return await self.topics.refresh(name)

    # --- MetadataSupport: the controller's operations -----------------------------------------
    def _active_controller(self) -> KafkaController:
        if self.controller is None or not self.controller.is_active:
            raise not_controller()
        return self.controller

    def require_controller(self) -> None:
        self._active_controller()

    async def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool,
                            timeout: float) -> dict[tuple[str, int], ErrorCode]:
        controller = self._active_controller()
        fut = controller.enqueue("unclean_election" if unclean else "preferred_election", partitions, wait=True)
        assert fut is not None
        results: dict[tuple[str, int], ErrorCode] = await asyncio.wait_for(fut, timeout)
        return results

    async def alter_reassignments(self, moves: dict[tuple[str, int], list[int] | None], allow_rf_change: bool,
                                  timeout: float) -> dict[tuple[str, int], PartitionResult]:
        controller = self._active_controller()
        results: dict[tuple[str, int], PartitionResult] = {}
        accepted: dict[tuple[str, int], list[int] | None] = {}
        for (topic, p), target in moves.items():
            current = controller.assignments.get(topic, {}).get(p)
            if not allow_rf_change and target is not None and current is not None and len(target) != len(current):
                results[(topic, p)] = (ErrorCode.INVALID_REPLICATION_FACTOR,
                                       "The replication factor is changed but allow_replication_factor_change "
                                       "is false")
            else:
                accepted[(topic, p)] = target
        if accepted:
            fut = controller.enqueue("reassign", accepted, wait=True)
            assert fut is not None
            results.update(await asyncio.wait_for(fut, timeout))
        return results

    def list_reassignments(self) -> dict[tuple[str, int], Reassignment]:
        return self._active_controller().list_reassignments()

    async def shut_down_broker(self, broker_id: int, timeout: float) -> list[tuple[str, int]]:
        fut = self._active_controller().enqueue("controlled_shutdown", broker_id, wait=True)
        assert fut is not None
        try:
            remaining: list[tuple[str, int]] = await asyncio.wait_for(fut, timeout)
        except Exception as e:  # the controller resigned or timed out meanwhile
            raise not_controller() from e
        return remaining

    def producer_id_manager(self) -> ZkProducerIdManager:
        return self._producer_ids

    async def producer_ids_ready(self) -> None:
        await self._producer_ids.ready()

    def broker_info(self) -> zd.BrokerInfo:
        return advertised_broker_info(self.broker.config)

    # --- start-up ---------------------------------------------------------------------------------
    async def connect(self) -> None:
        """Connect and agree on the cluster id; runs before the topics are loaded."""
        self.zk.loop = asyncio.get_running_loop()
        log.info("Connecting to ZooKeeper at %s", self.zk.connect_string)
        await asyncio.to_thread(self.zk.start)
        proposed = str(self.broker.config.get("cluster.id") or "") or \
            base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.broker.topics.cluster_id = await asyncio.to_thread(self.zk.get_or_create_cluster_id, proposed)
        await asyncio.to_thread(self.zk.wait_for_broker_id, self.broker.broker_id)
        self.zk.on_session_lost.append(self._on_session_lost)
        self.zk.on_session_reestablished.append(self._on_session_reestablished)

    async def start(self) -> None:
        """After the logs are loaded and the listeners are up: register, elect, replicate."""
        rm = self.broker.replica_manager
        rm.fetcher_manager = self.fetchers
        rm.isr_writer = self.write_isr
        for part in rm.partitions.values():
            part.isr_writer = self.write_isr
        self.topics.start_watches()
        self.broker_epoch = await asyncio.to_thread(self.zk.register_broker, self.broker_info())
        log.info("Registered broker %d at %s (broker epoch %d)", self.broker.broker_id,
                 zd.broker_path(self.broker.broker_id), self.broker_epoch)
        self.controller = KafkaController(self.broker, self.zk)
        self.controller.startup()
        self._producer_ids._prefetch()  # the first block, before the first InitProducerId asks
        await features.load(self.broker)  # the finalized features ApiVersions answers with
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._isr_shrink_loop()))

    async def _isr_shrink_loop(self) -> None:
        interval = self.broker.config.int("replica.lag.time.max.ms") / 2000
        while True:
            await asyncio.sleep(interval)
            try:
                self.broker.replica_manager.shrink_isrs()
            except Exception:
                log.exception("ISR shrink check failed")

    def write_isr(self, part: Partition, new_isr: list[int], done: Callable[[int | None], None]) -> None:
        """A leader's own ISR change: conditional on the znode version it last saw, then an
        ``/isr_change_notification`` so the controller propagates it. The write runs on a worker
        thread (a slow or unreachable ZooKeeper never stalls the event loop); ``done`` is called
        back on the loop with the new znode version, or None when the write failed."""
        if not self.zk.connected or self._isr_executor_stopped:
            done(None)
            return
        state = zd.LeaderAndIsr(part.leader_id, part.leader_epoch, tuple(new_isr), part.controller_epoch,
                                part.zk_version)
        tp = part.tp
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(self._isr_executor, self.zk.update_partition_state, tp.topic, tp.partition,
                                   state)

        def finished(f: asyncio.Future[zd.LeaderAndIsr]) -> None:
            try:
                new = f.result()
            except BadVersionError:
                log.info("[Partition %s] Cached zkVersion %d not equal to that in ZooKeeper; skipping the ISR "
                         "update", tp, state.zk_version)
                done(None)
                return
            except Exception as e:
                log.warning("[Partition %s] ISR update failed: %s", tp, e)
                done(None)
                return
            self._isr_changes_pending.add((tp.topic, tp.partition))
            if self._isr_flush is None:
                self._isr_flush = loop.call_later(ISR_CHANGE_PROPAGATION_S, self._propagate_isr_changes)
            done(new.zk_version)

        fut.add_done_callback(finished)

    def _propagate_isr_changes(self) -> None:
        """One ``/isr_change_notification`` znode for every ISR this broker changed in the last
        moment (Kafka's ReplicaManager.maybePropagateIsrChanges): a broker that rejoins expands
        hundreds of ISRs at once, and one notification each would flood the controller. Written
        on a worker thread, as every ZooKeeper write of a running broker."""
        self._isr_flush = None
        changed, self._isr_changes_pending = sorted(self._isr_changes_pending), set()
        if changed and not self._isr_executor_stopped:
            asyncio.get_running_loop().run_in_executor(self._isr_executor, self._notify_isr_change, changed)

    def _notify_isr_change(self, changed: list[tuple[str, int]]) -> None:
        try:
            self.zk.notify_isr_change(changed)
        except Exception as e:
            log.warning("Could not write an ISR change notification for %d partitions: %s", len(changed), e)

    # --- requests to other brokers -------------------------------------------------------------
    async def send_to_broker(self, broker_id: int, request: ApiMessage, version: int,
                             timeout: float = 30.0) -> ApiMessage:
        """An inter-broker request (transaction markers, verification) to a live broker; raises
        ConnectionError when it cannot be reached or is not known."""
        info = self.cache.brokers.get(broker_id)
        if info is None:
            raise ConnectionError(f"broker {broker_id} is not alive")
        ep = info.endpoint(self.broker.inter_broker_listener)
        c = self._clients.get(broker_id)
        if c is None or (c.host, c.port) != (ep.host, ep.port):
            if c is not None:
                c.close()
            c = self._clients[broker_id] = BrokerClient(ep.host, ep.port, f"samsa-broker-{self.broker.broker_id}")
        return await c.send(request, version, timeout=timeout)

    async def await_topic_metadata(self, topics: dict[str, int], *, present: bool, timeout: float) -> list[int]:
        """Until every live broker's Metadata answer shows each of ``topics`` (name -> partition
        count) with a leader for every partition (``present``), or no longer lists it (not
        ``present``), or ``timeout`` seconds pass. Returns the brokers that had not caught up.

        CreateTopics and DeleteTopics answer only after this, so that a client may go to any
        broker with the answer in hand: Kafka's DelayedCreatePartitions / DelayedDeleteTopics
        wait for the controller's UpdateMetadata to reach the broker that was asked; here every
        broker is asked, because a broker learns of a topic from two sources (the ZooKeeper
        watch on ``/brokers/topics`` and the controller's LeaderAndIsr and UpdateMetadata) that
        arrive at different moments. A broker that cannot be reached, or does not let us
        describe the topics, is not waited for."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        names = sorted(topics)
        done: set[int] = set()

        def caught_up(resp: ApiMessage) -> bool | None:
            by_name = {t.name: t for t in resp.topics}
            for name in names:
                t = by_name.get(name)
                if t is None:
                    return None
                if t.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                    return None  # nothing to learn from this broker
                if not present:
                    if t.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        return False
                elif t.error_code != 0 or len(t.partitions) != topics[name] or \
                        any(p.error_code != 0 or p.leader_id < 0 for p in t.partitions):
                    return False
            return True

        async def ask(broker_id: int) -> None:
            req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names],
                                  allow_auto_topic_creation=False)
            try:
                ok = caught_up(await self.send_to_broker(broker_id, req, 7,
                                                         timeout=max(0.1, min(5.0, deadline - loop.time()))))
            except ConnectionError as e:
                log.info("Not waiting for broker %d to learn of topics %s: %s", broker_id, names, e)
                ok = None
            except Exception as e:  # e.g. inter-broker authentication refused: the topics exist regardless
                log.warning("Not waiting for broker %d to learn of topics %s: %r", broker_id, names, e)
                ok = None
            if ok is None or ok:
                done.add(broker_id)

        while True:
            pending = [b for b in sorted(self.cache.brokers) if b not in done]
            if pending:
                await asyncio.gather(*(ask(b) for b in pending))
                pending = [b for b in pending if b not in done]
            if not pending or loop.time() >= deadline:
                return pending
            await asyncio.sleep(0.02)

    # --- sessions -----------------------------------------------------------------------------
    def _on_session_lost(self) -> None:
        """Our registration is gone, so the controller has moved our leaderships elsewhere: stop
        acting as leader for what we can no longer prove we lead (produces get
        NOT_LEADER_OR_FOLLOWER and retry on the new leader) until the controller, after we
        re-register, tells us our roles again."""
        if self.controller is not None:
            self.controller._resign()
        rm = self.broker.replica_manager
        led = [tp for tp, part in rm.partitions.items() if part.is_leader]
        for tp in led:
            part = rm.partitions[tp]
            part.make_follower(-1, part.leader_epoch, part.isr, part.replicas, part.zk_version, part.controller_epoch)
            for listener in rm.leadership_listeners:
                listener(tp, False, part.leader_epoch)
        if led:
            log.warning("ZooKeeper session lost: stepped down as leader of %d partitions until the controller "
                        "assigns them again", len(led))

    def _on_session_reestablished(self) -> None:
        asyncio.get_running_loop().create_task(self._reregister())

    async def _reregister(self) -> None:
        try:
            self.broker_epoch = await asyncio.to_thread(self.zk.register_broker, self.broker_info())
            log.info("Re-registered broker %d after a new ZooKeeper session (broker epoch %d)",
                     self.broker.broker_id, self.broker_epoch)
        except Exception:
            log.exception("Re-registration of broker %d failed", self.broker.broker_id)
        if self.controller is not None:
            self.controller.enqueue("elect")

    # --- shutdown -----------------------------------------------------------------------------
    async def controlled_shutdown(self) -> None:
        cfg = self.broker.config
        if not cfg["controlled.shutdown.enable"]:
            return
        retries = cfg.int("controlled.shutdown.max.retries")
        backoff = cfg.int("controlled.shutdown.retry.backoff.ms") / 1000
        for attempt in range(1, retries + 1):
            cid = self.cache.controller_id
            info = self.cache.brokers.get(cid)
            if info is None:
                await asyncio.sleep(min(backoff, 1.0))
                continue
            ep = info.endpoint(self.broker.inter_broker_listener)
            client = BrokerClient(ep.host, ep.port, f"samsa-broker-{self.broker.broker_id}")
            try:
                req: ApiMessage = ControlledShutdownRequest(broker_id=self.broker.broker_id, broker_epoch=self.broker_epoch)
                resp = await client.send(req, CONTROLLED_SHUTDOWN_VERSION, timeout=30)
                if resp.error_code == 0 and not resp.remaining_partitions:
                    log.info("Controlled shutdown succeeded: no partition is led by broker %d any more",
                             self.broker.broker_id)
                    return
                log.info("Controlled shutdown attempt %d: error %s, %d partitions remain led here", attempt,
                         ErrorCode(resp.error_code).name, len(resp.remaining_partitions))
                if resp.error_code == 0:
                    return  # what remains has no other in-sync replica to move to
            except ConnectionError as e:
                log.warning("Controlled shutdown attempt %d failed: %s", attempt, e)
            finally:
                client.close()
            await asyncio.sleep(backoff)
        log.warning("Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed")

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        if self._isr_flush is not None:  # a clean stop still tells the controller what changed
            self._isr_flush.cancel()
            self._isr_flush = None
            changed, self._isr_changes_pending = sorted(self._isr_changes_pending), set()
            if changed:
                await asyncio.get_running_loop().run_in_executor(self._isr_executor, self._notify_isr_change,
                                                                 changed)
        self._isr_executor_stopped = True
        self._isr_executor.shutdown(wait=False, cancel_futures=True)
        for c in self._clients.values():
            c.close()
        await self.fetchers.shutdown()
        if self.controller is not None:
            await self.controller.shutdown()
        await asyncio.to_thread(self.zk.close)
