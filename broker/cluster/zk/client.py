"""The broker's ZooKeeper client (Kafka's ``KafkaZkClient``) over kazoo.

Theory of operation: kazoo runs its own connection thread and delivers watches and session
events there. This class is the only place that touches kazoo; everything it reports back
(children changes, data changes, session loss and re-establishment) is handed to the broker's
event loop with ``call_soon_threadsafe`` so that the broker's state keeps one owner. Calls are
synchronous (a loopback ZooKeeper answers in well under a millisecond); the controller runs its
batches of writes with ``asyncio.to_thread`` so that a slow ZooKeeper never stalls the
Kafka listener.

Invariants: every partition-state write is conditional on the znode version it was read at
(a leader and the controller never overwrite each other's decisions); the controller's writes
are fenced by ``/controller_epoch``; ephemeral znodes (``/brokers/ids/<id>``, ``/controller``) are
owned by this client's session and re-created, never stolen, after a session is re-established.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.protocol.states import ZnodeStat

from protocol.errors import ErrorCode, KafkaError

from .. import zk_data as zd

log = logging.getLogger("samsa.zk")

T = TypeVar("T")

# How long a request handler waits for ZooKeeper before it answers REQUEST_TIMED_OUT (Kafka's
# zookeeper.session.timeout.ms bounds its ZooKeeper requests; a client request must not wait longer)
DEFAULT_REQUEST_TIMEOUT_S = 10.0


class ZooKeeperUnavailable(RuntimeError):
    """No ZooKeeper session could be established within ``zookeeper.connection.timeout.ms``."""


class BrokerIdInUse(RuntimeError):
    """``/brokers/ids/<id>`` is held by another live broker's session."""


class ZooKeeperRequestTimeout(KafkaError):
    """A ZooKeeper request did not complete in time (ZooKeeper slow, stopped or unreachable):
    answered as REQUEST_TIMED_OUT, as Kafka answers an admin request whose ZooKeeper write timed out."""

    code = ErrorCode.REQUEST_TIMED_OUT


class ControllerMovedError(RuntimeError):
    """A controller write was fenced: another controller has a newer epoch."""


def split_connect(connect: str) -> tuple[str, str]:
    """``host:port,host:port/chroot`` -> (hosts, chroot or '')."""
    if "/" in connect:
        hosts, chroot = connect.split("/", 1)
        return hosts, "/" + chroot.strip("/") if chroot.strip("/") else ""
    return connect, ""


class KafkaZkClient:
    def __init__(self, connect: str, *, session_timeout_ms: int = 18000, connection_timeout_ms: int = 18000,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.connect_string = connect
        self.hosts, self.chroot = split_connect(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self.loop = loop
        self.zk: KazooClient | None = None
        self.on_session_lost: list[Callable[[], object]] = []
        self.on_session_reestablished: list[Callable[[], object]] = []
        self._lost = False
        self._closing = False
        # The threads that run ZooKeeper requests for the event loop (see call()): their own, so
        # that requests stuck on a hung ZooKeeper never starve the loop's default executor.
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="zk-request")

    # --- session -------------------------------------------------------------------------------
    def start(self) -> None:
        """Connect (creating the chroot first), retrying until ``zookeeper.connection.timeout.ms``."""
        deadline = time.monotonic() + self.connection_timeout_ms / 1000
        if self.chroot:
            base = self._connect(self.hosts, deadline)
            try:
                base.ensure_path(self.chroot)
            finally:
                base.stop()
                base.close()
        self.zk = self._connect(self.hosts + self.chroot, deadline)
        self.zk.add_listener(self._state_listener)
        for path in zd.PERSISTENT_PATHS:
            self.zk.ensure_path(path)

    def _connect(self, hosts: str, deadline: float) -> KazooClient:
        attempt = 0
        while True:
            attempt += 1
            zk = KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000,
                             connection_retry={"max_tries": -1, "delay": 0.2, "max_delay": 2},
                             command_retry={"max_tries": 3, "delay": 0.1, "max_delay": 1})
            remaining = deadline - time.monotonic()
            try:
                zk.start(timeout=max(1.0, min(remaining, 5.0)))
                return zk
            except Exception as e:  # kazoo raises its own timeout type
                zk.stop()
                zk.close()
                if time.monotonic() >= deadline:
                    raise ZooKeeperUnavailable(
                        f"Could not connect to ZooKeeper at {hosts} within zookeeper.connection.timeout.ms="
                        f"{self.connection_timeout_ms} ({attempt} attempts; last error: {e or type(e).__name__})"
                    ) from None
                log.warning("Waiting for ZooKeeper at %s (attempt %d): %s", hosts, attempt, e or type(e).__name__)
                time.sleep(0.5)

    async def call(self, fn: Callable[..., T], *args: object, timeout: float = DEFAULT_REQUEST_TIMEOUT_S) -> T:
        """Run the blocking ZooKeeper request ``fn(*args)`` on a ZooKeeper request thread and await
        its result on the loop, for at most ``timeout`` seconds: a slow or unreachable ZooKeeper
        never stalls the event loop. Raises ZooKeeperRequestTimeout when the time runs out (the
        request may still complete later) or at once while the connection is down."""
        if not self.connected:
            raise ZooKeeperRequestTimeout(message=f"not connected to ZooKeeper at {self.connect_string}")
        fut = asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise ZooKeeperRequestTimeout(message=f"ZooKeeper at {self.connect_string} did not answer within "
                                                  f"{timeout:.1f} s") from None
        except (ConnectionLoss, SessionExpiredError, OperationTimeoutError) as e:
            raise ZooKeeperRequestTimeout(message=f"ZooKeeper at {self.connect_string} did not answer: "
                                                  f"{type(e).__name__}") from None

    def submit(self, fn: Callable[..., T], *args: object) -> Future[T]:
        """Run ``fn(*args)`` on a ZooKeeper request thread, for a caller that does not wait for it."""
        return self._executor.submit(fn, *args)

    def close(self) -> None:
        self._closing = True
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self.zk is not None:
            try:
                self.zk.stop()
                self.zk.close()
            except Exception:
                pass

    @property
    def session_id(self) -> int:
        assert self.zk is not None
        sid = self.zk.client_id
        return int(sid[0]) if sid else -1

    @property
    def connected(self) -> bool:
        return self.zk is not None and self.zk.state == KazooState.CONNECTED

    def _state_listener(self, state: str) -> None:  # kazoo's thread
        if self._closing:
            return
        if state == KazooState.LOST:
            self._lost = True
            log.warning("ZooKeeper session expired")
            self._dispatch(self.on_session_lost)
        elif state == KazooState.SUSPENDED:
            log.warning("ZooKeeper connection suspended; waiting for it to come back")
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            log.info("New ZooKeeper session established (0x%x)", self.session_id)
            self._dispatch(self.on_session_reestablished)

    def _dispatch(self, callbacks: list[Callable[[], object]]) -> None:
        for cb in callbacks:
            self._call_in_loop(cb)

    def _call_in_loop(self, fn: Callable[..., object], *args: object) -> None:
        if self.loop is None:
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    # --- watches -------------------------------------------------------------------------------
    def watch_children(self, path: str, callback: Callable[[list[str]], object]) -> None:
        """Call ``callback(children)`` in the event loop now and whenever ``path``'s children change."""
        assert self.zk is not None
        self.zk.ensure_path(path)

        def watcher(children: list[str]) -> bool:
            self._call_in_loop(callback, sorted(children))
            return not self._closing
        self.zk.ChildrenWatch(path, watcher)

    def watch_data(self, path: str, callback: Callable[[bytes | None], object]) -> None:
        """Call ``callback(data or None)`` in the event loop now and whenever ``path`` changes."""
        assert self.zk is not None

        def watcher(data: bytes | None, _stat: ZnodeStat | None, *_a: object) -> bool:
            self._call_in_loop(callback, data)
            return not self._closing
        self.zk.DataWatch(path, watcher)

    # --- generic -------------------------------------------------------------------------------
    def get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        assert self.zk is not None
        try:
            data, stat = self.zk.get(path)
            return data, stat
        except NoNodeError:
            return None

    def children(self, path: str) -> list[str]:
        assert self.zk is not None
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            return []

    def delete(self, path: str, recursive: bool = False) -> None:
        assert self.zk is not None
        try:
            self.zk.delete(path, recursive=recursive)
        except NoNodeError:
            pass

    # --- /feature ------------------------------------------------------------------------------
    def get_features(self) -> tuple[dict[str, int], int] | None:
        """(finalized levels, znode version), or None when no feature was ever finalized."""
        got = self.get(zd.FEATURE)
        return None if got is None else (zd.decode_features(got[0]), got[1].version)

    def set_features(self, levels: dict[str, int], expected_version: int | None) -> int:
        """Write the finalized levels: create ``/feature`` (``expected_version`` None) or replace it
        at that znode version (BadVersionError / NodeExistsError when someone wrote in between).
        Returns the new znode version."""
        assert self.zk is not None
        if expected_version is None:
            self.zk.create(zd.FEATURE, zd.encode_features(levels), makepath=True)
            return 0
        return int(self.zk.set(zd.FEATURE, zd.encode_features(levels), version=expected_version).version)

    # --- cluster id ----------------------------------------------------------------------------
    def get_or_create_cluster_id(self, proposed: str) -> str:
        assert self.zk is not None
        try:
            self.zk.create(zd.CLUSTER_ID, zd.encode_cluster_id(proposed), makepath=True)
            return proposed
        except NodeExistsError:
            got = self.get(zd.CLUSTER_ID)
            assert got is not None
            return zd.decode_cluster_id(got[0])

    # --- brokers -------------------------------------------------------------------------------
    def register_broker(self, info: zd.BrokerInfo) -> int:
        """Create ``/brokers/ids/<id>`` (ephemeral); returns the broker epoch (its czxid)."""
        assert self.zk is not None
        path = zd.broker_path(info.id)
        try:
            self.zk.create(path, zd.encode_broker_info(info), ephemeral=True, makepath=True)
        except NodeExistsError:
            got = self.zk.exists(path)
            if got is None or got.owner_session_id != self.session_id:
                raise BrokerIdInUse(f"Broker id {info.id} is already registered in ZooKeeper at {path} by "
                                    "another live broker (a broker.id must be unique in the cluster)") from None
        stat = self.zk.exists(path)
        return int(stat.czxid) if stat else -1

    def wait_for_broker_id(self, broker_id: int) -> None:
        """Before start-up touches anything: if ``/brokers/ids/<id>`` is held by another session,
        wait up to the session timeout for it to expire (the previous run of this broker, killed
        without a goodbye); if it is still held then, another live broker has this id."""
        assert self.zk is not None
        path = zd.broker_path(broker_id)
        deadline = time.monotonic() + self.session_timeout_ms / 1000 + 2
        warned = False
        while True:
            stat = self.zk.exists(path)
            if stat is None or stat.owner_session_id == self.session_id:
                return
            if time.monotonic() >= deadline:
                raise BrokerIdInUse(f"Broker id {broker_id} is already registered in ZooKeeper at {path} by another "
                                    "live broker (a broker.id must be unique in the cluster)")
            if not warned:
                log.warning("%s is held by another ZooKeeper session (0x%x); waiting up to "
                            "zookeeper.session.timeout.ms=%d for it to expire", path, stat.owner_session_id,
                            self.session_timeout_ms)
                warned = True
            time.sleep(0.25)

    def get_all_brokers(self) -> dict[int, zd.BrokerInfo]:
        out: dict[int, zd.BrokerInfo] = {}
        for child in self.children(zd.BROKER_IDS):
            got = self.get(zd.broker_path(int(child)))
            if got is not None:
                out[int(child)] = zd.decode_broker_info(int(child), got[0], int(got[1].czxid))
        return out

    # --- topics --------------------------------------------------------------------------------
    def get_all_topics(self) -> list[str]:
        return self.children(zd.BROKER_TOPICS)

    def get_topic_assignment(self, topic: str) -> zd.TopicAssignment | None:
        got = self.get(zd.topic_path(topic))
        return zd.decode_topic_assignment(got[0]) if got else None

    def create_topic(self, topic: str, assignment: zd.TopicAssignment, config: dict[str, str]) -> None:
        """Kafka's AdminZkClient.createTopicWithAssignment: config first, then the assignment
        (whose appearance is what the controller reacts to)."""
        assert self.zk is not None
        self.set_entity_config("topics", topic, config)
        try:
            self.zk.create(zd.topic_path(topic), zd.encode_topic_assignment(assignment), makepath=True)
        except NodeExistsError:
            raise TopicExists(topic) from None

    def set_topic_assignment(self, topic: str, assignment: zd.TopicAssignment) -> None:
        assert self.zk is not None
        self.zk.set(zd.topic_path(topic), zd.encode_topic_assignment(assignment))

    def delete_topic_znodes(self, topic: str) -> None:
        self.delete(zd.topic_path(topic), recursive=True)
        self.delete(zd.topic_config_path(topic))
        self.delete(zd.delete_topic_path(topic))

    def queue_topic_deletion(self, topic: str) -> None:
        assert self.zk is not None
        try:
            self.zk.create(zd.delete_topic_path(topic), b"", makepath=True)
        except NodeExistsError:
            pass

    # --- partition state ---------------------------------------------------------------------
    def get_partition_state(self, topic: str, partition: int) -> zd.LeaderAndIsr | None:
        got = self.get(zd.partition_state_path(topic, partition))
        return zd.decode_partition_state(got[0], got[1].version) if got else None

    def create_partition_state(self, topic: str, partition: int, state: zd.LeaderAndIsr) -> zd.LeaderAndIsr:
        assert self.zk is not None
        path = zd.partition_state_path(topic, partition)
        try:
            self.zk.create(path, zd.encode_partition_state(state), makepath=True)
            return zd.LeaderAndIsr(state.leader, state.leader_epoch, state.isr, state.controller_epoch, 0)
        except NodeExistsError:
            return self.update_partition_state(topic, partition, state)

    def update_partition_state(self, topic: str, partition: int, state: zd.LeaderAndIsr) -> zd.LeaderAndIsr:
        """Conditional on ``state.zk_version``; raises BadVersionError when someone wrote in between."""
        assert self.zk is not None
        stat = self.zk.set(zd.partition_state_path(topic, partition), zd.encode_partition_state(state),
                           version=state.zk_version)
        return zd.LeaderAndIsr(state.leader, state.leader_epoch, state.isr, state.controller_epoch, stat.version)

    def update_partition_states_fenced(self, updates: list[tuple[str, int, zd.LeaderAndIsr]],
                                       controller_epoch_zk_version: int) -> dict[tuple[str, int], zd.LeaderAndIsr | None]:
        """The controller's writes: each conditional on the partition state's znode version *and* on
        ``/controller_epoch`` still being at the version this controller wrote (a deposed controller's
        writes fail as a whole). Returns the new states; ``None`` where the version check failed.
        Raises ControllerMovedError if the controller epoch moved."""
        assert self.zk is not None
        out: dict[tuple[str, int], zd.LeaderAndIsr | None] = {}
        for topic, partition, state in updates:
            path = zd.partition_state_path(topic, partition)
            t = self.zk.transaction()
            t.check(zd.CONTROLLER_EPOCH, controller_epoch_zk_version)
            t.set_data(path, zd.encode_partition_state(state), version=state.zk_version)
            res = t.commit()
            # a failed multi-op reports the failing op's error and RolledBackError for the others
            if isinstance(res[0], (BadVersionError, NoNodeError)):
                raise ControllerMovedError("/controller_epoch changed: another controller was elected")
            if isinstance(res[1], Exception):
                if isinstance(res[1], NoNodeError):
                    out[(topic, partition)] = self.create_partition_state(topic, partition, state)
                else:
                    out[(topic, partition)] = None
                continue
            out[(topic, partition)] = zd.LeaderAndIsr(state.leader, state.leader_epoch, state.isr,
                                                      state.controller_epoch, res[1].version)
        return out

    # --- controller ----------------------------------------------------------------------------
    def try_become_controller(self, broker_id: int) -> bool:
        assert self.zk is not None
        try:
            self.zk.create(zd.CONTROLLER, zd.encode_controller(broker_id), ephemeral=True)
            return True
        except NodeExistsError:
            return False

    def get_controller_id(self) -> int:
        got = self.get(zd.CONTROLLER)
        return zd.decode_controller(got[0]) if got else -1

    def increment_controller_epoch(self) -> tuple[int, int]:
        """Bump ``/controller_epoch`` with a conditional write: the new epoch fences every older
        controller. Returns (epoch, znode version)."""
        assert self.zk is not None
        while True:
            got = self.get(zd.CONTROLLER_EPOCH)
            if got is None:
                try:
                    self.zk.create(zd.CONTROLLER_EPOCH, zd.encode_controller_epoch(1))
                    return 1, 0
                except NodeExistsError:
                    continue
            epoch = zd.decode_controller_epoch(got[0]) + 1
            try:
                stat = self.zk.set(zd.CONTROLLER_EPOCH, zd.encode_controller_epoch(epoch), version=got[1].version)
                return epoch, stat.version
            except BadVersionError:
                continue

    def get_controller_epoch(self) -> int:
        got = self.get(zd.CONTROLLER_EPOCH)
        return zd.decode_controller_epoch(got[0]) if got else 0

    # --- configs -------------------------------------------------------------------------------
    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        got = self.get(f"{zd.CONFIG}/{entity_type}/{name}")
        return zd.decode_config(got[0]) if got else {}

    def set_entity_config(self, entity_type: str, name: str, config: dict[str, str], *, notify: bool = False) -> None:
        """Write ``/config/<type>/<name>``; with ``notify``, queue a ``/config/changes`` notification."""
        assert self.zk is not None
        path = f"{zd.CONFIG}/{entity_type}/{name}"
        data = zd.encode_config(config)
        try:
            self.zk.create(path, data, makepath=True)
        except NodeExistsError:
            self.zk.set(path, data)
        if notify:
            self.zk.create(f"{zd.CONFIG_CHANGES}/{zd.CONFIG_CHANGE_PREFIX}",
                           zd.encode_config_change(f"{entity_type}/{name}"), sequence=True, makepath=True)

    # --- ACLs (broker/security/acl_store.ZkAclStore) -------------------------------------------
    def get_acl_nodes(self) -> dict[str, bytes]:
        """Every ``/kafka-acl*/<Type>/<name>`` znode path with its data."""
        out: dict[str, bytes] = {}
        for root in (zd.KAFKA_ACL, zd.KAFKA_ACL_PREFIXED):
            for rtype in self.children(root):
                for name in self.children(f"{root}/{rtype}"):
                    got = self.get(f"{root}/{rtype}/{name}")
                    if got is not None:
                        out[f"{root}/{rtype}/{name}"] = got[0]
        return out

    def set_acl_node(self, path: str, data: bytes | None) -> None:
        """Write (or with None delete) one ACL znode; then notify every broker to reload."""
        assert self.zk is not None
        if data is None:
            try:
                self.zk.delete(path)
            except NoNodeError:
                pass
        else:
            try:
                self.zk.create(path, data, makepath=True)
            except NodeExistsError:
                self.zk.set(path, data)

    def notify_acl_change(self, what: str) -> None:
        assert self.zk is not None
        self.zk.create(f"{zd.KAFKA_ACL_CHANGES}/{zd.ACL_CHANGE_PREFIX}", what.encode(), sequence=True,
                       makepath=True)

    # --- ISR change notifications ------------------------------------------------------------
    def notify_isr_change(self, partitions: list[tuple[str, int]]) -> None:
        assert self.zk is not None
        self.zk.create(f"{zd.ISR_CHANGE_NOTIFICATION}/{zd.ISR_CHANGE_PREFIX}", zd.encode_isr_change(partitions),
                       sequence=True, makepath=True)

    def take_isr_changes(self) -> set[tuple[str, int]]:
        """Read and delete every pending ``/isr_change_notification`` child. The reads and deletes
        are pipelined (kazoo's async calls), so a burst of notifications costs a few round trips,
        not three per notification."""
        assert self.zk is not None
        names = self.children(zd.ISR_CHANGE_NOTIFICATION)
        paths = [f"{zd.ISR_CHANGE_NOTIFICATION}/{name}" for name in names]
        changed: set[tuple[str, int]] = set()
        for res in [self.zk.get_async(path) for path in paths]:
            try:
                changed.update(zd.decode_isr_change(res.get()[0]))
            except NoNodeError:
                pass
        for res in [self.zk.delete_async(path) for path in paths]:
            try:
                res.get()
            except NoNodeError:
                pass
        return changed

    def get_partition_states(self, tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], zd.LeaderAndIsr]:
        """The current state znode of each partition, read pipelined; absent ones are left out."""
        assert self.zk is not None
        pending = [(tp, self.zk.get_async(zd.partition_state_path(*tp))) for tp in tps]
        out: dict[tuple[str, int], zd.LeaderAndIsr] = {}
        for tp, res in pending:
            try:
                data, stat = res.get()
            except NoNodeError:
                continue
            out[tp] = zd.decode_partition_state(data, stat.version)
        return out

    # --- reassignment --------------------------------------------------------------------------
    def get_reassignment(self) -> dict[tuple[str, int], list[int]]:
        got = self.get(zd.REASSIGN_PARTITIONS)
        return zd.decode_reassignment(got[0]) if got and got[0] else {}

    def set_reassignment(self, moves: dict[tuple[str, int], list[int]]) -> None:
        assert self.zk is not None
        if not moves:
            self.delete(zd.REASSIGN_PARTITIONS)
            return
        data = zd.encode_reassignment(moves)
        try:
            self.zk.create(zd.REASSIGN_PARTITIONS, data, makepath=True)
        except NodeExistsError:
            self.zk.set(zd.REASSIGN_PARTITIONS, data)

    # --- producer ids --------------------------------------------------------------------------
    def allocate_producer_id_block(self, broker_id: int, block_size: int) -> tuple[int, int]:
        """Claim the next block of producer ids with a conditional write (Kafka's ZkProducerIdManager):
        no two brokers ever get overlapping blocks."""
        assert self.zk is not None
        while True:
            got = self.get(zd.LATEST_PRODUCER_ID_BLOCK)
            if got is None or not got[0]:
                start = 0
                data = zd.encode_producer_id_block(broker_id, start, start + block_size - 1)
                try:
                    if got is None:
                        self.zk.create(zd.LATEST_PRODUCER_ID_BLOCK, data, makepath=True)
                    else:
                        self.zk.set(zd.LATEST_PRODUCER_ID_BLOCK, data, version=got[1].version)
                    return start, start + block_size - 1
                except (NodeExistsError, BadVersionError):
                    continue
            _b, _s, end = zd.decode_producer_id_block(got[0])
            start = end + 1
            try:
                self.zk.set(zd.LATEST_PRODUCER_ID_BLOCK, zd.encode_producer_id_block(broker_id, start,
                                                                                    start + block_size - 1),
                            version=got[1].version)
                return start, start + block_size - 1
            except BadVersionError:
                continue


class TopicExists(RuntimeError):
    pass


__all__ = ["KafkaZkClient", "ZooKeeperUnavailable", "BrokerIdInUse", "ControllerMovedError", "TopicExists",
           "BadVersionError", "split_connect"]
