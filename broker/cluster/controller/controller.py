"""The controller of a ZooKeeper-mode cluster (Kafka's ``KafkaController``).

Theory of operation: every broker runs one of these, and the broker that creates the ephemeral
``/controller`` znode is the active controller. On winning it bumps ``/controller_epoch`` (the
number that fences every older controller: brokers refuse requests with a smaller epoch, and
each of its ZooKeeper writes is checked against that znode's version), reads the whole cluster
state from ZooKeeper into its context (live brokers, replica assignments, partition states),
brings every partition online, takes replicas on brokers that are not alive out of every ISR
(they may have died with the previous controller) and tells every broker everything:
UpdateMetadata to all, LeaderAndIsr to every replica.

Afterwards it reacts to events, one at a time from one queue (Kafka's
``ControllerEventManager``), so its state has a single owner:

* broker membership (children of ``/brokers/ids``): a broker that left has its leaderships
  moved to the next live in-sync replica in assignment order and is removed from every ISR;
  a broker that (re)joined gets LeaderAndIsr for its replicas and brings offline partitions
  back. With no live in-sync replica a partition goes offline (leader -1) unless
  ``unclean.leader.election.enable`` allows electing an out-of-sync replica, which is logged as
  the data loss it is;
* topics created, grown (assignment znodes) and queued for deletion (``/admin/delete_topics``);
* ISR changes that leaders wrote themselves (``/isr_change_notification``), propagated with
  UpdateMetadata;
* ControlledShutdown from a broker that is stopping: its leaderships move away first, and it
  stops following, so clients with retries see no error;
* preferred-leader elections (ElectLeaders, and every ``leader.imbalance.check.interval.seconds``
  when ``auto.leader.rebalance.enable``).

Every leadership change bumps the partition's leader epoch and is written to
``/brokers/topics/<t>/partitions/<p>/state`` before any broker hears of it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.data_container import DataContainer

from protocol.errors import ErrorCode
from protocol.inter_broker import (
    LEADER_AND_ISR_VERSION,
    STOP_REPLICA_VERSION,
    UPDATE_METADATA_VERSION,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

from .. import zk_data as zd
from ..support import ClusterBroker
from ..zk.client import ControllerMovedError, KafkaZkClient
from .channel import ControllerChannelManager

log = logging.getLogger("samsa.controller")

TP = tuple[str, int]


class KafkaController:
    def __init__(self, broker: ClusterBroker, zk: KafkaZkClient) -> None:
        self.broker = broker
        self.zk = zk
        self.broker_id: int = broker.broker_id
        self.epoch = 0
        self.epoch_zk_version = -1
        self.active = False
        self.live: dict[int, zd.BrokerInfo] = {}
        self.shutting_down: set[int] = set()
        self.assignments: dict[str, dict[int, list[int]]] = {}
        self.states: dict[TP, zd.LeaderAndIsr] = {}
        self.events: asyncio.Queue[tuple[str, tuple[Any, ...], asyncio.Future[Any] | None]] = asyncio.Queue()
        self.channel: ControllerChannelManager | None = None
        self._task: asyncio.Task[None] | None = None
        self._rebalance_task: asyncio.Task[None] | None = None
        self._watching = False
        self._isr_change_queued = False  # an "isr_changes" event is waiting in the queue
        self._watched_topics: set[str] = set()
        # ongoing reassignments: partition -> (target replicas, adding, removing)
        self.reassignments: dict[TP, tuple[list[int], list[int], list[int]]] = {}

    # --- what others read ---------------------------------------------------------------------------
    @property
    def is_active(self) -> bool:
        return self.active

    @property
    def offline_partition_count(self) -> int:
        return sum(1 for s in self.states.values() if s.leader < 0) if self.active else 0

    # --- lifecycle ----------------------------------------------------------------------------------
    def startup(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._event_loop(), name="controller-events")
        self.zk.watch_data(zd.CONTROLLER, lambda _data: self.enqueue("elect"))

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
        self._resign()

    def enqueue(self, kind: str, *args: Any, wait: bool = False) -> asyncio.Future[Any] | None:
        fut = asyncio.get_running_loop().create_future() if wait else None
        self.events.put_nowait((kind, args, fut))
        return fut

    async def _event_loop(self) -> None:
        handlers: dict[str, Callable[..., Awaitable[Any]]] = {
            "elect": self._elect, "brokers": self._on_broker_change, "topics": self._on_topic_change,
            "topic_data": self._on_topic_data, "deletions": self._on_topic_deletion,
            "isr_changes": self._on_isr_change, "controlled_shutdown": self._on_controlled_shutdown,
            "preferred_election": self._on_preferred_election, "unclean_election": self._on_unclean_election,
            "reassign": self._on_reassign, "legacy_reassign": self._on_legacy_reassign,
        }
        while True:
            kind, args, fut = await self.events.get()
            if kind != "elect" and not self.active:
                if fut is not None and not fut.done():
                    fut.set_exception(NotControllerError())
                continue
            try:
                result = await handlers[kind](*args)
                if fut is not None and not fut.done():
                    fut.set_result(result)
            except ControllerMovedError:
                log.warning("Controller epoch %d was superseded; resigning", self.epoch)
                self._resign()
                if fut is not None and not fut.done():
                    fut.set_exception(NotControllerError())
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.exception("Controller failed handling %s", kind)
                if fut is not None and not fut.done():
                    fut.set_exception(e)

    # --- election -----------------------------------------------------------------------------------
    async def _elect(self) -> None:
        current = await asyncio.to_thread(self.zk.get_controller_id)
        if current == -1:
            if await asyncio.to_thread(self.zk.try_become_controller, self.broker_id):
                await self._on_become_controller()
            else:
                self._resign()
        elif current != self.broker_id:
            self._resign()
        elif not self.active:  # our /controller znode, but we stepped down: take the role up again
            await self._on_become_controller()

    def _resign(self) -> None:
        if self.active:
            log.info("Broker %d resigned as the controller (controller epoch %d)", self.broker_id, self.epoch)
        self.active = False
        if self.channel is not None:
            self.channel.shutdown()
            self.channel = None
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None

    async def _on_become_controller(self) -> None:
        t0 = time.monotonic()
        self.epoch, self.epoch_zk_version = await asyncio.to_thread(self.zk.increment_controller_epoch)
        self.active = True
        self.shutting_down.clear()
        cfg = self.broker.config
        self.channel = ControllerChannelManager(self.broker_id, self.broker.inter_broker_listener,
                                                cfg.int("controller.socket.timeout.ms") / 1000)
        log.info("Broker %d became the controller (controller epoch %d)", self.broker_id, self.epoch)
        self.live = await asyncio.to_thread(self.zk.get_all_brokers)
        for info in self.live.values():
            self.channel.add_broker(info)
        await asyncio.to_thread(self._load_topics)
        if not self._watching:
            self._watching = True
            self.zk.watch_children(zd.BROKER_IDS, lambda ids: self.enqueue("brokers", ids))
            self.zk.watch_children(zd.BROKER_TOPICS, lambda names: self.enqueue("topics", names))
            self.zk.watch_children(zd.DELETE_TOPICS, lambda names: self.enqueue("deletions", names))
            self.zk.watch_children(zd.ISR_CHANGE_NOTIFICATION, lambda names: self._isr_change_seen(names))
            self.zk.watch_data(zd.REASSIGN_PARTITIONS, lambda data: self.enqueue("legacy_reassign", data))
        for t in self.assignments:
            self._watch_topic(t)
        # bring every partition online: new ones get their first state, leaderless ones a leader
        await self._online_partitions(list(self.states_and_new()))
        # Kafka's ReplicaStateMachine.startup: a replica on a broker that is not alive now (it may
        # have died with the previous controller, which never got to act on it) goes offline,
        # i.e. out of every ISR, so acks=all and min.insync.replicas see the truth at once
        offline = {r for tp in self.states for r in self.states[tp].isr if r not in self.live}
        if offline:
            log.info("Controller %d: removing offline brokers %s from the ISRs they are in",
                     self.broker_id, sorted(offline))
            await self._remove_from_isr(list(self.states), offline)
        self._send_update_metadata(self.live)
        for b in self.live:  # everything, to every replica: a new controller trusts no broker's view
            self._send_leader_and_isr(b, [tp for tp in self.states if b in self._replicas(tp)])
        # ISR changes leaders wrote while no controller was active (the watch only fires on change)
        self._isr_change_queued = True
        self.enqueue("isr_changes")
        pending = await asyncio.to_thread(self.zk.children, zd.DELETE_TOPICS)
        if pending:
            await self._on_topic_deletion(pending)
        if cfg["auto.leader.rebalance.enable"]:
            self._rebalance_task = asyncio.get_running_loop().create_task(self._auto_rebalance())
        log.info("Controller %d initialised %d partitions of %d topics over brokers %s in %.0f ms",
                 self.broker_id, len(self.states), len(self.assignments), sorted(self.live),
                 (time.monotonic() - t0) * 1000)

    def _load_topics(self) -> None:
        self.assignments.clear()
        self.states.clear()
        self.reassignments.clear()
        for t in self.zk.get_all_topics():
            a = self.zk.get_topic_assignment(t)
            if a is None:
                continue
            self.assignments[t] = a.partitions
            for p in a.partitions:
                st = self.zk.get_partition_state(t, p)
                if st is not None:
                    self.states[(t, p)] = st
            for p, adding in a.adding.items():  # resume reassignments an old controller started
                removing = a.removing.get(p, [])
                target = [r for r in a.partitions[p] if r not in removing]
                self.reassignments[(t, p)] = (target, list(adding), list(removing))

    def states_and_new(self) -> Iterable[TP]:
        for t, parts in self.assignments.items():
            for p in parts:
                yield (t, p)

    def _replicas(self, tp: TP) -> list[int]:
        return self.assignments.get(tp[0], {}).get(tp[1], [])

    def _watch_topic(self, topic: str) -> None:
        if topic in self._watched_topics:
            return
        self._watched_topics.add(topic)

        def changed(data: bytes | None) -> None:
            if data is None:
                self._watched_topics.discard(topic)
            else:
                self.enqueue("topic_data", topic)
        self.zk.watch_data(zd.topic_path(topic), changed)

    # --- partition state machine ----------------------------------------------------------------------
    def _unclean_allowed(self, topic: str) -> bool:
        info = self.broker.topics.get(topic)
        raw = (info.configs if info else {}).get("unclean.leader.election.enable")
        if raw is None:
            return bool(self.broker.config["unclean.leader.election.enable"])
        return str(raw).lower() == "true"

    def _choose(self, tp: TP, current: zd.LeaderAndIsr | None, exclude: set[int]) -> tuple[int, list[int]]:
        """(leader, isr) for ``tp``: the first live in-sync replica in assignment order; else, if
        allowed, the first live replica (unclean); else -1 (offline)."""
        replicas = self._replicas(tp)
        usable = [r for r in replicas if r in self.live and r not in exclude and r not in self.shutting_down]
        if current is None:  # a new partition: every live replica is in sync (they are all empty)
            return (usable[0], usable) if usable else (zd.NO_LEADER, [])
        live_isr = [r for r in usable if r in current.isr]
        if live_isr:
            isr = [r for r in current.isr if r in self.live and r not in exclude]
            return live_isr[0], isr
        if usable and self._unclean_allowed(tp[0]):
            log.warning("Unclean leader election for %s-%d: no in-sync replica is alive (ISR %s); electing "
                        "out-of-sync replica %d. Messages acknowledged but not replicated to it ARE LOST.",
                        tp[0], tp[1], list(current.isr), usable[0])
            return usable[0], [usable[0]]
        return zd.NO_LEADER, list(current.isr)

    async def _online_partitions(self, tps: list[TP], exclude: set[int] | None = None) -> list[TP]:
        """Give each partition in ``tps`` that has no live leader one; returns those changed."""
        exclude = exclude or set()
        updates: list[tuple[str, int, zd.LeaderAndIsr]] = []
        creates: list[tuple[str, int, zd.LeaderAndIsr]] = []
        for tp in tps:
            cur = self.states.get(tp)
            if cur is not None and cur.leader in self.live and cur.leader not in exclude:
                continue
            leader, isr = self._choose(tp, cur, exclude)
            if cur is None:
                if leader == zd.NO_LEADER:
                    continue
                creates.append((tp[0], tp[1], zd.LeaderAndIsr(leader, 0, tuple(isr), self.epoch)))
            else:
                if leader == zd.NO_LEADER and cur.leader == zd.NO_LEADER:
                    continue
                if leader == zd.NO_LEADER:
                    log.error("Partition %s-%d is offline: no live in-sync replica (ISR %s, replicas %s, "
                              "unclean.leader.election.enable=false)", tp[0], tp[1], list(cur.isr),
                              self._replicas(tp))
                updates.append((tp[0], tp[1], cur.new_leader(leader, isr, self.epoch)))
        return await self._write_states(creates, updates)

    async def _write_states(self, creates: list[tuple[str, int, zd.LeaderAndIsr]],
                            updates: list[tuple[str, int, zd.LeaderAndIsr]]) -> list[TP]:
        changed: list[TP] = []

        def write() -> None:
            for t, p, st in creates:
                self.states[(t, p)] = self.zk.create_partition_state(t, p, st)
                changed.append((t, p))
            if updates:
                for (t, p), new in self.zk.update_partition_states_fenced(updates, self.epoch_zk_version).items():
                    if new is None:  # a leader changed its ISR meanwhile: re-read; the next event retries
                        fresh = self.zk.get_partition_state(t, p)
                        if fresh is not None:
                            self.states[(t, p)] = fresh
                        continue
                    self.states[(t, p)] = new
                    changed.append((t, p))
        await asyncio.to_thread(write)
        for tp in changed:
            st = self.states[tp]
            log.info("Partition %s-%d: leader %d, leader epoch %d, ISR %s", tp[0], tp[1], st.leader,
                     st.leader_epoch, list(st.isr))
        return changed

    async def _remove_from_isr(self, tps: Iterable[TP], brokers: set[int]) -> list[TP]:
        updates = []
        for tp in tps:
            cur = self.states.get(tp)
            if cur is None or cur.leader in brokers or not brokers & set(cur.isr):
                continue
            isr = [r for r in cur.isr if r not in brokers] or list(cur.isr)
            updates.append((tp[0], tp[1], cur.new_leader(cur.leader, isr, self.epoch)))
        return await self._write_states([], updates)

    # --- telling the brokers ------------------------------------------------------------------------
    def _partition_state_fields(self, cls: type[DataContainer], tp: TP, st: zd.LeaderAndIsr) -> dict[str, object]:
        return dict(partition_index=tp[1], controller_epoch=st.controller_epoch, leader=st.leader,
                    leader_epoch=st.leader_epoch, isr=list(st.isr), zk_version=st.zk_version,
                    replicas=list(self._replicas(tp)))

    def _send_leader_and_isr(self, broker_id: int, tps: Iterable[TP]) -> asyncio.Future[ApiMessage] | None:
        if self.channel is None:
            return None
        R = LeaderAndIsrRequest
        PS = R.LeaderAndIsrTopicState.LeaderAndIsrPartitionState
        by_topic: dict[str, list[DataContainer]] = {}
        leaders: set[int] = set()
        for tp in tps:
            st = self.states.get(tp)
            if st is None:
                continue
            by_topic.setdefault(tp[0], []).append(PS(adding_replicas=[], removing_replicas=[], is_new=False,
                                                     **self._partition_state_fields(PS, tp, st)))
            if st.leader in self.live:
                leaders.add(st.leader)
        if not by_topic:
            return None
        req = R(controller_id=self.broker_id, controller_epoch=self.epoch, max_broker_epoch=-1,
                topic_states=[R.LeaderAndIsrTopicState(topic_name=t, partition_states=ps)
                              for t, ps in by_topic.items()],
                live_leaders=[R.LeaderAndIsrLiveLeader(broker_id=b, host_name=self.live[b].endpoint().host,
                                                       port=self.live[b].endpoint().port) for b in sorted(leaders)])
        return self.channel.send(broker_id, req, LEADER_AND_ISR_VERSION, wait=True)

    def _update_metadata_request(self) -> ApiMessage:
        R = UpdateMetadataRequest
        B = R.UpdateMetadataBroker
        PS = R.UpdateMetadataTopicState.UpdateMetadataPartitionState
        by_topic: dict[str, list[DataContainer]] = {}
        for tp, st in sorted(self.states.items()):
            replicas = self._replicas(tp)
            by_topic.setdefault(tp[0], []).append(PS(
                offline_replicas=[r for r in replicas if r not in self.live],
                **self._partition_state_fields(PS, tp, st)))
        # partitions that never had a leader (no live replica at creation) are listed leaderless
        for t, parts in self.assignments.items():
            for p, replicas in parts.items():
                if (t, p) not in self.states:
                    by_topic.setdefault(t, []).append(PS(
                        partition_index=p, controller_epoch=self.epoch, leader=-1, leader_epoch=-1, isr=[],
                        zk_version=-1, replicas=list(replicas), offline_replicas=list(replicas)))
        return R(controller_id=self.broker_id, controller_epoch=self.epoch, max_broker_epoch=-1,
                 topic_states=[R.UpdateMetadataTopicState(topic_name=t, partition_states=ps)
                               for t, ps in by_topic.items()],
                 live_brokers=[B(id=b.id, endpoints=[B.UpdateMetadataEndpoint(
                     port=e.port, host=e.host, listener=e.listener, security_protocol=_protocol_id(e))
                     for e in b.endpoints], rack=b.rack) for b in self.live.values()])

    def _send_update_metadata(self, brokers: Iterable[int]) -> None:
        if self.channel is None:
            return
        req = self._update_metadata_request()
        for b in brokers:
            self.channel.send(b, req, UPDATE_METADATA_VERSION)

    def _send_stop_replica(self, broker_id: int, tps: Iterable[TP], delete: bool) -> asyncio.Future[ApiMessage] | None:
        if self.channel is None:
            return None
        R = StopReplicaRequest
        by_topic: dict[str, list[DataContainer]] = {}
        for t, p in tps:
            st = self.states.get((t, p))
            by_topic.setdefault(t, []).append(R.StopReplicaTopicState.StopReplicaPartitionState(
                partition_index=p, leader_epoch=st.leader_epoch if st else -1, delete_partition=delete))
        if not by_topic:
            return None
        req = R(controller_id=self.broker_id, controller_epoch=self.epoch, broker_epoch=-1,
                topic_states=[R.StopReplicaTopicState(topic_name=t, partition_states=ps)
                              for t, ps in by_topic.items()])
        return self.channel.send(broker_id, req, STOP_REPLICA_VERSION, wait=True)

    def _propagate(self, changed: Iterable[TP]) -> None:
        """LeaderAndIsr to the live replicas of ``changed``, then UpdateMetadata to every broker."""
        per_broker: dict[int, list[TP]] = {}
        for tp in changed:
            for r in self._replicas(tp):
                if r in self.live:
                    per_broker.setdefault(r, []).append(tp)
        for b, tps in per_broker.items():
            self._send_leader_and_isr(b, tps)
        self._send_update_metadata(self.live)

    # --- events ----------------------------------------------------------------------------------------
    async def _on_broker_change(self, ids: list[str]) -> None:
        current = {int(i) for i in ids}
        fresh = await asyncio.to_thread(self.zk.get_all_brokers)
        # a broker that re-registered with a new epoch (its znode's czxid) between two looks has
        # bounced: it failed and started again, as Kafka's controller treats it
        bounced = {b for b in current & set(self.live) if b in fresh and fresh[b].epoch != self.live[b].epoch}
        dead = (set(self.live) - current) | bounced
        new = {b for b in current if b in fresh and (b not in self.live or b in bounced)}
        for b in dead:
            self.live.pop(b, None)
            self.shutting_down.discard(b)
            if self.channel is not None:
                self.channel.remove_broker(b)
        if dead:
            log.info("Controller %d: brokers %s left the cluster%s; live brokers %s", self.broker_id, sorted(dead),
                     f" (bounced: {sorted(bounced)})" if bounced else "", sorted(set(self.live)))
            led = [tp for tp, st in self.states.items() if st.leader in dead]
            changed = await self._online_partitions(led, exclude=dead)
            changed += await self._remove_from_isr([tp for tp in self.states if tp not in led], dead)
            self._propagate(changed)
        for b in new:
            self.live[b] = fresh[b]
            self.shutting_down.discard(b)
            if self.channel is not None:
                self.channel.add_broker(fresh[b])
        if new:
            log.info("Controller %d: brokers %s joined the cluster; live brokers %s", self.broker_id, sorted(new),
                     sorted(self.live))
            offline = [tp for tp, st in self.states.items() if st.leader not in self.live]
            never = [tp for tp in self.states_and_new() if tp not in self.states]
            changed = await self._online_partitions(offline + never)
            self._send_update_metadata(self.live)
            for b in new:
                self._send_leader_and_isr(b, [tp for tp in self.states if b in self._replicas(tp)])
            self._propagate(changed)

    async def _on_topic_change(self, names: list[str]) -> None:
        new = [t for t in names if t not in self.assignments]
        gone = [t for t in self.assignments if t not in names]
        for t in gone:
            self._forget_topic(t)
        if not new:
            if gone:
                self._send_update_metadata(self.live)
            return
        for t in new:
            a = await asyncio.to_thread(self.zk.get_topic_assignment, t)
            if a is not None:
                self.assignments[t] = a.partitions
                self._watch_topic(t)
        tps = [(t, p) for t in new if t in self.assignments for p in self.assignments[t]]
        changed = await self._online_partitions(tps)
        self._propagate(changed)

    async def _on_topic_data(self, topic: str) -> None:
        a = await asyncio.to_thread(self.zk.get_topic_assignment, topic)
        if a is None or topic not in self.assignments:
            return
        added = [p for p in a.partitions if p not in self.assignments[topic]]
        self.assignments[topic] = a.partitions
        if added:
            changed = await self._online_partitions([(topic, p) for p in added])
            self._propagate(changed)

    def _forget_topic(self, topic: str) -> None:
        self.assignments.pop(topic, None)
        for tp in [tp for tp in self.states if tp[0] == topic]:
            del self.states[tp]

    async def _on_topic_deletion(self, names: list[str]) -> None:
        for t in names:
            replicas = {r for rs in self.assignments.get(t, {}).values() for r in rs}
            tps = [(t, p) for p in self.assignments.get(t, {})]
            futs = [self._send_stop_replica(b, tps, delete=True) for b in replicas if b in self.live]
            for f in futs:
                if f is not None:
                    try:
                        await asyncio.wait_for(asyncio.shield(f), 10)
                    except TimeoutError:
                        pass
            await asyncio.to_thread(self.zk.delete_topic_znodes, t)
            self._forget_topic(t)
            log.info("Controller %d deleted topic %s from replicas %s", self.broker_id, t, sorted(replicas))
        if names:
            self._send_update_metadata(self.live)

    def _isr_change_seen(self, names: list[str]) -> None:
        """The notification watch fires once per child written or deleted: a burst of leaders'
        ISR changes (a broker rejoining catches up on every partition at once) would queue one
        event per znode, each re-reading the others. Queue one event at a time; it takes every
        notification present when it runs (Kafka's controller coalesces the same way)."""
        if names and not self._isr_change_queued:
            self._isr_change_queued = True
            self.enqueue("isr_changes")

    async def _on_isr_change(self) -> None:
        self._isr_change_queued = False

        def read() -> dict[TP, zd.LeaderAndIsr]:
            return self.zk.get_partition_states(self.zk.take_isr_changes())
        fresh = await asyncio.to_thread(read)
        for tp, st in fresh.items():
            cur = self.states.get(tp)
            if cur is None or st.zk_version >= cur.zk_version:
                self.states[tp] = st
        if fresh:
            self._send_update_metadata(self.live)
        done = [tp for tp in fresh if tp in self.reassignments]
        if done:
            await self._maybe_complete_reassignments(done)

    async def _on_controlled_shutdown(self, broker_id: int) -> list[TP]:
        """Move ``broker_id``'s leaderships away and stop its replicas following; returns the
        partitions it still leads (no other live in-sync replica)."""
        if broker_id not in self.live:
            return []
        self.shutting_down.add(broker_id)
        led = [tp for tp, st in self.states.items() if st.leader == broker_id and len(self._replicas(tp)) > 1]
        changed = await self._online_partitions(led, exclude={broker_id})
        followed = [tp for tp, st in self.states.items() if st.leader != broker_id and broker_id in st.isr]
        changed += await self._remove_from_isr(followed, {broker_id})
        self._propagate(changed)
        self._send_stop_replica(broker_id, [tp for tp in self.states if broker_id in self._replicas(tp)
                                            and self.states[tp].leader != broker_id], delete=False)
        remaining = [tp for tp, st in self.states.items() if st.leader == broker_id]
        log.info("Controlled shutdown of broker %d: moved %d leaderships; %d remain", broker_id,
                 len(led) - len([tp for tp in led if tp in remaining]), len(remaining))
        return remaining

    async def _on_preferred_election(self, tps: list[TP] | None) -> dict[TP, ErrorCode]:
        """Make the first replica of each partition its leader where it is alive and in sync."""
        targets = list(self.states) if tps is None else tps
        results: dict[TP, ErrorCode] = {}
        updates = []
        for tp in targets:
            cur = self.states.get(tp)
            replicas = self._replicas(tp)
            if cur is None or not replicas:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            preferred = replicas[0]
            if cur.leader == preferred:
                results[tp] = ErrorCode.ELECTION_NOT_NEEDED
            elif preferred not in self.live or preferred not in cur.isr or preferred in self.shutting_down:
                results[tp] = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            else:
                updates.append((tp[0], tp[1], cur.new_leader(preferred, cur.isr, self.epoch)))
                results[tp] = ErrorCode.NONE
        changed = await self._write_states([], updates)
        for t, p, _st in updates:
            if (t, p) not in changed:
                results[(t, p)] = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        self._propagate(changed)
        return results

    async def _auto_rebalance(self) -> None:
        interval = self.broker.config.int("leader.imbalance.check.interval.seconds")
        pct = self.broker.config.int("leader.imbalance.per.broker.percentage")
        while self.active:
            await asyncio.sleep(interval)
            per_broker: dict[int, list[TP]] = {}
            for tp in self.states:
                replicas = self._replicas(tp)
                if replicas:
                    per_broker.setdefault(replicas[0], []).append(tp)
            todo = []
            for b, tps in per_broker.items():
                off = [tp for tp in tps if self.states[tp].leader != b]
                if tps and len(off) * 100 / len(tps) > pct and b in self.live:
                    todo += off
            if todo:
                log.info("Auto leader rebalance: preferred election for %d partitions", len(todo))
                self.enqueue("preferred_election", todo)


    async def _on_unclean_election(self, tps: list[TP] | None) -> dict[TP, ErrorCode]:
        """ElectLeaders UNCLEAN: a partition without a live leader gets any live replica (KIP-460)."""
        targets = [tp for tp, st in self.states.items() if st.leader not in self.live] if tps is None else tps
        results: dict[TP, ErrorCode] = {}
        updates = []
        for tp in targets:
            cur = self.states.get(tp)
            if cur is None:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if cur.leader in self.live:
                results[tp] = ErrorCode.ELECTION_NOT_NEEDED
                continue
            live = [r for r in self._replicas(tp) if r in self.live and r not in self.shutting_down]
            if not live:
                results[tp] = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                continue
            in_sync = [r for r in live if r in cur.isr]
            leader = (in_sync or live)[0]
            if not in_sync:
                log.warning("Unclean leader election for %s-%d (ElectLeaders): electing out-of-sync replica %d",
                            tp[0], tp[1], leader)
            updates.append((tp[0], tp[1], cur.new_leader(leader, in_sync or [leader], self.epoch)))
            results[tp] = ErrorCode.NONE
        changed = await self._write_states([], updates)
        self._propagate(changed)
        return results

    # --- partition reassignment (KIP-455) ---------------------------------------------------------------
    async def _on_reassign(self, moves: dict[TP, list[int] | None]) -> dict[TP, tuple[ErrorCode, str | None]]:
        """Start (or cancel, with None) reassignments: the new replicas are added and follow; when
        all of them are in the ISR the leadership moves into the target set and the old ones are
        dropped (see _maybe_complete_reassignments)."""
        results: dict[TP, tuple[ErrorCode, str | None]] = {}
        by_topic: dict[str, list[TP]] = {}
        for tp, target in moves.items():
            if tp[0] not in self.assignments or tp[1] not in self.assignments[tp[0]]:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unknown partition {tp[0]}-{tp[1]}")
                continue
            if target is None:
                if tp not in self.reassignments:
                    results[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                   f"No reassignment in progress for {tp[0]}-{tp[1]}")
                    continue
                _target, adding, removing = self.reassignments.pop(tp)
                original = [r for r in self._replicas(tp) if r not in adding]
                self.assignments[tp[0]][tp[1]] = original
                by_topic.setdefault(tp[0], []).append(tp)
                results[tp] = (ErrorCode.NONE, None)
                for b in adding:
                    if b in self.live:
                        self._send_stop_replica(b, [tp], delete=True)
                continue
            if len(set(target)) != len(target) or not target:
                results[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Duplicate or empty replicas: {target}")
                continue
            unknown = [r for r in target if r not in self.live]
            if unknown:
                results[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"Replica assignment {target} names brokers that are not alive: {unknown}")
                continue
            current = self.reassignments[tp][0] if tp in self.reassignments else None
            base = [r for r in self._replicas(tp) if current is None or r not in self.reassignments[tp][1]]
            if target == base:
                self.reassignments.pop(tp, None)
                results[tp] = (ErrorCode.NONE, None)
                continue
            adding = [r for r in target if r not in base]
            removing = [r for r in base if r not in target]
            self.reassignments[tp] = (list(target), adding, removing)
            self.assignments[tp[0]][tp[1]] = list(target) + removing
            by_topic.setdefault(tp[0], []).append(tp)
            results[tp] = (ErrorCode.NONE, None)
            log.info("Reassigning %s-%d from %s to %s (adding %s, removing %s)", tp[0], tp[1], base, target, adding,
                     removing)
        for topic in by_topic:
            await asyncio.to_thread(self._write_assignment, topic)
        touched = [tp for tps in by_topic.values() for tp in tps]
        if touched:
            self._propagate(touched)
            await self._maybe_complete_reassignments([tp for tp in touched if tp in self.reassignments])
        return results

    async def _on_legacy_reassign(self, data: bytes | None) -> None:
        """The pre-KIP-455 way: a tool writes ``/admin/reassign_partitions``; the controller starts
        those moves and deletes the znode once it has taken them over (they go on from the topic
        znodes' adding/removing fields)."""
        if not data:
            return
        try:
            moves = zd.decode_reassignment(data)
        except (ValueError, KeyError) as e:
            log.warning("Ignoring unreadable %s: %s", zd.REASSIGN_PARTITIONS, e)
            moves = {}
        if moves:
            results = await self._on_reassign(dict(moves))
            bad = {tp: r for tp, r in results.items() if r[0] != ErrorCode.NONE}
            if bad:
                log.warning("Reassignments from %s refused: %s", zd.REASSIGN_PARTITIONS, bad)
        await asyncio.to_thread(self.zk.delete, zd.REASSIGN_PARTITIONS)

    def _write_assignment(self, topic: str) -> None:
        a = self.zk.get_topic_assignment(topic)
        if a is None:
            return
        a.partitions = {p: list(r) for p, r in self.assignments[topic].items()}
        a.adding = {tp[1]: ad for tp, (_t, ad, _r) in self.reassignments.items() if tp[0] == topic}
        a.removing = {tp[1]: rm for tp, (_t, _a, rm) in self.reassignments.items() if tp[0] == topic}
        self.zk.set_topic_assignment(topic, a)

    async def _maybe_complete_reassignments(self, tps: list[TP]) -> None:
        for tp in tps:
            if tp not in self.reassignments:
                continue
            target, _adding, removing = self.reassignments[tp]
            cur = self.states.get(tp)
            if cur is None or not set(target) <= set(cur.isr):
                continue
            leader = cur.leader if cur.leader in target and cur.leader in self.live else \
                next((r for r in target if r in cur.isr and r in self.live), -1)
            if leader < 0:
                continue
            del self.reassignments[tp]
            self.assignments[tp[0]][tp[1]] = list(target)
            new = cur.new_leader(leader, [r for r in cur.isr if r in target], self.epoch)
            changed = await self._write_states([], [(tp[0], tp[1], new)])
            await asyncio.to_thread(self._write_assignment, tp[0])
            for b in removing:
                if b in self.live:
                    self._send_stop_replica(b, [tp], delete=True)
            self._propagate(changed or [tp])
            log.info("Reassignment of %s-%d completed: replicas %s, leader %d", tp[0], tp[1], target, leader)

    def list_reassignments(self) -> dict[TP, tuple[list[int], list[int], list[int]]]:
        return {tp: (self._replicas(tp), ad, rm) for tp, (_t, ad, rm) in self.reassignments.items()}


class NotControllerError(RuntimeError):
    """This broker is not (or no longer) the active controller."""


_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def _protocol_id(ep: zd.BrokerEndpoint) -> int:
    return _PROTOCOL_IDS.get(ep.security_protocol, 0)
