"""The group coordinator: Kafka's classic rebalance protocol and committed offsets.

Theory of operation
-------------------
One :class:`GroupCoordinator` per broker owns every group whose ``__consumer_offsets``
partition this broker leads (on a single broker: all of them). It is the only code that mutates
a :class:`~groupcoord.group.GroupMetadata`, and it runs entirely on the event loop thread:
request methods and timer callbacks are synchronous state changes, so no locks are needed.
A JoinGroup or SyncGroup that must wait (for the other members, for the leader's assignment)
parks an ``asyncio.Future`` on the member; the state change that completes the rebalance
resolves every parked future.

Durable facts are records in ``__consumer_offsets`` (see :mod:`groupcoord.records`):

* an OffsetCommit record per committed partition, a tombstone when it is deleted or expires;
* a GroupMetadata record when a generation's assignment is persisted (the leader's SyncGroup),
  when a rebalance leaves the group Empty, and when a static member is replaced; a tombstone
  when the group is deleted.

Every such change is written first and then applied by :meth:`GroupCoordinator.replay`, the
same method that rebuilds the state when the coordinator starts and reads its partitions back.
Membership that is not yet durable (a rebalance in flight, parked requests, heartbeats) lives
only in memory, as in Kafka: after a restart, a loaded group with members is Stable at its last
persisted generation and its members either keep heartbeating or expire.

Timers (all via the :class:`~groupcoord.timer.Scheduler`): per-member heartbeat expiry
(``session.timeout.ms``; 5 minutes for a member whose first join is still pending), the
pending-member expiry after MEMBER_ID_REQUIRED, the join deadline (``rebalance.timeout.ms``, or
``group.initial.rebalance.delay.ms`` steps for a group that was Empty), the pending-sync
deadline after a join completes, and the periodic offsets-retention sweep.

The coordinator never raises for a client error: every method returns Kafka error codes for the
handler to put in its response. It never touches sockets.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ErrorCode, KafkaError

from .group import (
    CONSUMER_PROTOCOL_TYPE,
    GroupMetadata,
    MemberMetadata,
    OffsetAndMetadata,
    parse_subscription_topics,
)
from .records import (
    DEFAULT_OFFSETS_TOPIC_PARTITIONS,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    decode_key,
    group_metadata_record,
    offset_commit_record,
    partition_for,
)
from .state import GroupState
from .storage import OffsetsStorage, TxnMarker, TxnRecord
from .timer import AsyncioScheduler, Scheduler

log = logging.getLogger(__name__)

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
NO_PROTOCOL = ""
TopicPartition = tuple[str, int]


@dataclass(slots=True)
class GroupConfig:
    """The broker properties the coordinator reads, with Kafka's defaults."""

    offsets_topic_num_partitions: int = DEFAULT_OFFSETS_TOPIC_PARTITIONS
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs (KIP-394): how long a member that has
    # never completed a join may stay without heartbeating.
    new_member_join_timeout_ms: int = 300_000

    _PROPERTIES = {
        "offsets.topic.num.partitions": "offsets_topic_num_partitions",
        "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
        "group.min.session.timeout.ms": "group_min_session_timeout_ms",
        "group.max.session.timeout.ms": "group_max_session_timeout_ms",
        "group.max.size": "group_max_size",
        "offsets.retention.minutes": "offsets_retention_minutes",
        "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
        "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    }

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> GroupConfig:
        cfg = cls()
        for prop, attr in cls._PROPERTIES.items():
            if props.get(prop) is not None:
                setattr(cfg, attr, int(props[prop]))
        return cfg

    @classmethod
    def property_names(cls) -> list[str]:
        return list(cls._PROPERTIES)


# --- results -----------------------------------------------------------------------------------

@dataclass(slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(slots=True)
class JoinGroupResult:
    error: ErrorCode
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: list[JoinGroupMember] = field(default_factory=list)


@dataclass(slots=True)
class SyncGroupResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupDescription:
    group_id: str
    error: ErrorCode
    state: str = GroupState.DEAD.value
    protocol_type: str = ""
    protocol: str = NO_PROTOCOL
    members: list[MemberDescription] = field(default_factory=list)


@dataclass(slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


@dataclass(slots=True)
class PartitionOffset:
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


def _resolve(fut: asyncio.Future[Any] | None, result: Any) -> None:
    if fut is not None and not fut.done():
        fut.set_result(result)


def _map_store_error(exc: BaseException, *, commit: bool) -> ErrorCode:
    """Kafka's remapping of log append errors at the coordinator boundary."""
    code = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE if commit else ErrorCode.UNKNOWN_SERVER_ERROR
    return code


class GroupCoordinator:
    """Classic consumer groups and their offsets, backed by ``__consumer_offsets``."""

    def __init__(self, storage: OffsetsStorage, config: GroupConfig | None = None,
                 scheduler: Scheduler | None = None) -> None:
        self.storage = storage
        self.config = config or GroupConfig()
        self.scheduler: Scheduler = scheduler or AsyncioScheduler()
        self.groups: dict[str, GroupMetadata] = {}
        self._loading: set[int] = set()
        self._owned: set[int] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._retention_timer: Any = None
        self._seq = 0  # records replayed so far: their log order
        self.active = False

    # ==========================================================================================
    # lifecycle
    # ==========================================================================================

    async def startup(self, partitions: Iterable[int] | None = None) -> None:
        """Replay our ``__consumer_offsets`` partitions, then serve. Requests for a group whose
        partition is still loading answer COORDINATOR_LOAD_IN_PROGRESS."""
        parts = list(range(self.config.offsets_topic_num_partitions)) if partitions is None \
            else list(partitions)
        self._loading.update(parts)
        self.active = True
        for p in parts:
            await self.load_partition(p)
        self._schedule_retention()

    async def load_partition(self, partition: int) -> None:
        self._loading.add(partition)
        n = 0
        for item in self.storage.read_all(partition):
            try:
                if isinstance(item, TxnRecord):
                    self.replay(item.key, item.value, producer_id=item.producer_id)
                elif isinstance(item, TxnMarker):
                    self.complete_transaction(partition, item.producer_id, item.commit)
                else:
                    self.replay(item[0], item[1])
            except (ValueError, IndexError) as e:  # a record we cannot parse must not stop loading
                log.warning("skipping unreadable __consumer_offsets record in partition %d: %s",
                            partition, e)
            n += 1
            if n % 1000 == 0:
                await asyncio.sleep(0)
        self._loading.discard(partition)
        self._owned.add(partition)
        for group in self.groups.values():
            if self._partition(group.group_id) == partition:
                for member in group.members.values():
                    self._schedule_heartbeat(group, member)

    async def shutdown(self) -> None:
        """Stop serving: parked requests answer NOT_COORDINATOR, timers stop."""
        self.active = False
        if self._retention_timer is not None:
            self._retention_timer.cancel()
        for group in self.groups.values():
            self._unload_group(group)
        self._owned.clear()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _unload_group(self, group: GroupMetadata) -> None:
        for timer in (group.join_timer, group.sync_timer):
            if timer is not None:
                timer.cancel()
        for member in group.members.values():
            if member.heartbeat_timer is not None:
                member.heartbeat_timer.cancel()
            self._complete_join(member, JoinGroupResult(ErrorCode.NOT_COORDINATOR, member.member_id))
            self._complete_sync(member, SyncGroupResult(ErrorCode.NOT_COORDINATOR))

    async def idle(self) -> None:
        """Wait until every write this coordinator started has been applied (tests use this)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("group coordinator task failed", exc_info=t.exception())
        task.add_done_callback(done)

    # ==========================================================================================
    # ownership and validation
    # ==========================================================================================

    def _partition(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def partition_for(self, group_id: str) -> int:
        return self._partition(group_id)

    def _validate(self, group_id: str | None, *, allow_empty_id: bool = False) -> ErrorCode:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group_id is None or (group_id == "" and not allow_empty_id):
            return ErrorCode.INVALID_GROUP_ID
        p = self._partition(group_id)
        if p in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if p not in self._owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    # ==========================================================================================
    # JoinGroup
    # ==========================================================================================

    async def join_group(self, group_id: str, member_id: str, protocol_type: str,
                         protocols: list[tuple[str, bytes]], session_timeout_ms: int,
                         rebalance_timeout_ms: int, *, group_instance_id: str | None = None,
                         client_id: str = "", client_host: str = "",
                         require_known_member_id: bool = False, reason: str | None = None,
                         supports_skip_assignment: bool = False) -> JoinGroupResult:
        """A JoinGroup request. Returns when the group's join phase completes for this member
        (or at once with MEMBER_ID_REQUIRED or an error)."""
        err = self._validate(group_id)
        if err:
            return JoinGroupResult(err, member_id)
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            return JoinGroupResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown:
                return JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = GroupMetadata(group_id, current_state_timestamp=self.scheduler.now_ms())
            self.groups[group_id] = group
        if not self._accept_joining_member(group, member_id, group_instance_id):
            return JoinGroupResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
        fut: asyncio.Future[JoinGroupResult] = asyncio.get_running_loop().create_future()
        args = _JoinArgs(group_instance_id, client_id, client_host, rebalance_timeout_ms,
                         session_timeout_ms, protocol_type, list(protocols), reason,
                         supports_skip_assignment)
        if is_unknown:
            self._unknown_member_join(group, args, require_known_member_id, fut)
        else:
            self._known_member_join(group, member_id, args, fut)
        return await fut

    def _accept_joining_member(self, group: GroupMetadata, member_id: str,
                               instance_id: str | None) -> bool:
        if group.has(member_id) or member_id in group.pending_members:
            return True
        if group.static_member_id(instance_id) is not None:
            return True
        return group.size + len(group.pending_members) < self.config.group_max_size

    def _unknown_member_join(self, group: GroupMetadata, a: _JoinArgs, require_known: bool,
                             fut: asyncio.Future[JoinGroupResult]) -> None:
        if group.is_in(GroupState.DEAD):
            # The group is being removed; the client will rediscover the coordinator and rejoin.
            _resolve(fut, JoinGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(a.protocol_type, a.protocols):
            _resolve(fut, JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        prefix = a.group_instance_id if a.group_instance_id is not None else a.client_id
        new_member_id = f"{prefix}-{uuid.uuid4()}"
        if a.group_instance_id is not None:
            old_member_id = group.static_member_id(a.group_instance_id)
            if old_member_id is not None:
                self._update_static_member_and_rebalance(group, old_member_id, new_member_id, a, fut)
            else:
                self._add_member_and_rebalance(group, new_member_id, a, fut)
        elif require_known:
            # KIP-394 (JoinGroup v4+): hand out the id first, so a client that times out and
            # retries reuses it instead of leaving orphan members behind.
            group.pending_members.add(new_member_id)
            self._schedule_pending_member_expiry(group, new_member_id, a.session_timeout_ms)
            _resolve(fut, JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, new_member_id))
        else:
            self._add_member_and_rebalance(group, new_member_id, a, fut)

    def _known_member_join(self, group: GroupMetadata, member_id: str, a: _JoinArgs,
                           fut: asyncio.Future[JoinGroupResult]) -> None:
        if group.is_in(GroupState.DEAD):
            _resolve(fut, JoinGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(a.protocol_type, a.protocols):
            _resolve(fut, JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if member_id in group.pending_members:
            # The second half of the KIP-394 handshake.
            self._add_member_and_rebalance(group, member_id, a, fut)
            return
        if group.is_static_member_fenced(a.group_instance_id, member_id):
            _resolve(fut, JoinGroupResult(ErrorCode.FENCED_INSTANCE_ID, member_id))
            return
        if not group.has(member_id):
            _resolve(fut, JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
            return
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, a, fut)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(a.protocols):
                # A retried join: answer with what the completed join phase said.
                _resolve(fut, self._join_result_for(group, member))
            else:
                self._update_member_and_rebalance(group, member, a, fut)
        elif state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(a.protocols):
                # The leader rejoining (e.g. its subscription's topics changed) or new metadata.
                self._update_member_and_rebalance(group, member, a, fut)
            else:
                # A follower rejoining with the same metadata gets the current generation back.
                _resolve(fut, JoinGroupResult(ErrorCode.NONE, member_id, group.generation_id,
                                              group.protocol_type, group.protocol_name,
                                              group.leader_id or ""))
        else:  # Empty: the member was removed
            _resolve(fut, JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _join_result_for(self, group: GroupMetadata, member: MemberMetadata) -> JoinGroupResult:
        members = self._current_member_metadata(group) if group.is_leader(member.member_id) else []
        return JoinGroupResult(ErrorCode.NONE, member.member_id, group.generation_id,
                               group.protocol_type, group.protocol_name, group.leader_id or "",
                               False, members)

    def _current_member_metadata(self, group: GroupMetadata) -> list[JoinGroupMember]:
        return [JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()]

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, a: _JoinArgs,
                                  fut: asyncio.Future[JoinGroupResult]) -> None:
        member = MemberMetadata(member_id, a.group_instance_id, a.client_id, a.client_host,
                                a.rebalance_timeout_ms, a.session_timeout_ms, a.protocol_type,
                                a.protocols, is_new=True, awaiting_join=fut, join_reason=a.reason)
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.initial_join_delay:
            group.new_member_added = True
        group.add(member)
        self._schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        reason = f"adding new member {member_id}" + (f" ({a.reason})" if a.reason else "")
        self._maybe_prepare_rebalance(group, reason)
        self._try_complete_join(group)

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     a: _JoinArgs, fut: asyncio.Future[JoinGroupResult]) -> None:
        group.update_member(member, a.protocols, a.rebalance_timeout_ms, a.session_timeout_ms)
        if member.awaiting_join is not None and member.awaiting_join is not fut:
            # A duplicate join from the same member: the older request is superseded.
            _resolve(member.awaiting_join,
                     JoinGroupResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.awaiting_join = fut
        member.join_reason = a.reason
        self._maybe_prepare_rebalance(group, f"updating metadata of member {member.member_id}")
        self._try_complete_join(group)

    def _update_static_member_and_rebalance(self, group: GroupMetadata, old_member_id: str,
                                            new_member_id: str, a: _JoinArgs,
                                            fut: asyncio.Future[JoinGroupResult]) -> None:
        """KIP-345: a static member came back with a new member id. Fence the old incarnation,
        and if the group's protocol would not change, keep the generation and assignment."""
        assert a.group_instance_id is not None
        current_leader = group.leader_id
        member = group.get(old_member_id)
        old_protocols = member.protocols
        old_timeouts = (member.rebalance_timeout_ms, member.session_timeout_ms)
        self._complete_join(member, JoinGroupResult(ErrorCode.FENCED_INSTANCE_ID, old_member_id))
        self._complete_sync(member, SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID))
        group.replace_static_member(a.group_instance_id, old_member_id, new_member_id)
        group.update_member(member, a.protocols, a.rebalance_timeout_ms, a.session_timeout_ms)
        member.awaiting_join = fut
        member.client_id, member.client_host = a.client_id, a.client_host
        self._schedule_heartbeat(group, member)
        state = group.state
        if state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                generation = group.generation_id
                self._spawn(self._persist_static_replacement(
                    group, member, generation, current_leader, old_member_id, old_protocols,
                    old_timeouts, a, fut))
            else:
                self._maybe_prepare_rebalance(
                    group, f"static member {a.group_instance_id} rejoined with a different protocol")
        elif state is GroupState.COMPLETING_REBALANCE:
            # The join phase already answered the old member id: run it again.
            self._prepare_rebalance(group, f"static member {a.group_instance_id} replaced")
        elif state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        else:
            raise AssertionError(f"a group with a static member cannot be {state.value}")

    async def _persist_static_replacement(self, group: GroupMetadata, member: MemberMetadata,
                                          generation: int, current_leader: str | None,
                                          old_member_id: str,
                                          old_protocols: list[tuple[str, bytes]],
                                          old_timeouts: tuple[int, int], a: _JoinArgs,
                                          fut: asyncio.Future[JoinGroupResult]) -> None:
        assignments = {m.member_id: m.assignment for m in group.members.values()}
        try:
            await self._store_group(group, assignments)
        except Exception as e:
            code = _map_store_error(e, commit=False)
            if member.awaiting_join is fut and group.members.get(member.member_id) is member \
                    and a.group_instance_id is not None:
                # Undo the replacement so the old incarnation stays valid.
                group.replace_static_member(a.group_instance_id, member.member_id, old_member_id)
                group.update_member(member, old_protocols, *old_timeouts)
                self._schedule_heartbeat(group, member)
            self._complete_join(member, JoinGroupResult(code, UNKNOWN_MEMBER_ID))
            return
        if member.awaiting_join is not fut or group.generation_id != generation:
            return  # a rebalance started meanwhile; the join phase will answer this member
        if a.supports_skip_assignment and group.is_leader(member.member_id):
            # KIP-814 (JoinGroup v9): tell the static leader it leads, but must not reassign.
            result = JoinGroupResult(ErrorCode.NONE, member.member_id, group.generation_id,
                                     group.protocol_type, group.protocol_name,
                                     group.leader_id or "", True,
                                     self._current_member_metadata(group))
        else:
            # Before v9: report the previous leader id, so a rejoining leader does not run a
            # trivial assignment that a Stable group would never propagate.
            result = JoinGroupResult(ErrorCode.NONE, member.member_id, group.generation_id,
                                     group.protocol_type, group.protocol_name,
                                     current_leader or "")
        self._complete_join(member, result)

    # --- rebalance phases ------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # The assignment of the generation that never became Stable is void.
            for m in group.members.values():
                m.assignment = b""
                self._complete_sync(m, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        group.pending_sync_members.clear()
        was_empty = group.is_in(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, self.scheduler.now_ms())
        log.info("preparing to rebalance group %s in state PreparingRebalance with old "
                 "generation %d (reason: %s)", group.group_id, group.generation_id, reason)
        if group.join_timer is not None:
            group.join_timer.cancel()
        if was_empty:
            # group.initial.rebalance.delay.ms: let the first members of a new group arrive
            # together instead of rebalancing once per member.
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            group.initial_join_delay = True
            group.new_member_added = False
            self._schedule_initial_join(group, delay, remaining)
        else:
            group.initial_join_delay = False
            group.join_timer = self.scheduler.call_later(
                group.rebalance_timeout_ms, lambda: self._on_join_deadline(group))
            self._try_complete_join(group)

    def _schedule_initial_join(self, group: GroupMetadata, delay: int, remaining: int) -> None:
        def fire() -> None:
            if group.join_timer is not handle or not group.is_in(GroupState.PREPARING_REBALANCE):
                return
            if group.new_member_added and remaining > 0:
                group.new_member_added = False
                step = min(self.config.group_initial_rebalance_delay_ms, remaining)
                self._schedule_initial_join(group, step, max(remaining - step, 0))
            else:
                group.initial_join_delay = False
                self._complete_join_phase(group)
        handle = self.scheduler.call_later(delay, fire)
        group.join_timer = handle

    def _on_join_deadline(self, group: GroupMetadata) -> None:
        if group.is_in(GroupState.PREPARING_REBALANCE) and self.groups.get(group.group_id) is group:
            self._complete_join_phase(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        if group.is_in(GroupState.PREPARING_REBALANCE) and not group.initial_join_delay \
                and group.has_all_members_joined():
            self._complete_join_phase(group)

    def _complete_join_phase(self, group: GroupMetadata) -> None:
        """Kafka's ``onCompleteJoin``: drop dynamic members that did not rejoin, start the next
        generation, and answer every parked JoinGroup (the leader gets all members' metadata)."""
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        for m in group.not_yet_rejoined():
            if not m.is_static:
                self._remove_member(group, m)
        if not self._elect_joined_leader(group) and group.members:
            # Only static members that have not rejoined remain: wait another rebalance
            # timeout for them (or for their session expiry to remove them).
            group.join_timer = self.scheduler.call_later(
                group.rebalance_timeout_ms, lambda: self._on_join_deadline(group))
            return
        now = self.scheduler.now_ms()
        group.generation_id += 1
        if group.members:
            group.protocol_name = group.select_protocol()
            group.transition_to(GroupState.COMPLETING_REBALANCE, now)
        else:
            group.protocol_name = None
            group.transition_to(GroupState.EMPTY, now)
        log.info("group %s generation %d (%s) with %d members", group.group_id,
                 group.generation_id, group.state.value, group.size)
        if group.is_in(GroupState.EMPTY):
            self._spawn(self._store_group_logged(group, {}))
            return
        for m in group.members.values():
            self._complete_join(m, self._join_result_for(group, m))
            m.is_new = False
            self._schedule_heartbeat(group, m)
        group.pending_sync_members = set(group.members)
        generation = group.generation_id
        group.sync_timer = self.scheduler.call_later(
            group.rebalance_timeout_ms, lambda: self._on_sync_deadline(group, generation))

    def _elect_joined_leader(self, group: GroupMetadata) -> bool:
        if group.leader_id is None:
            return False
        if group.members[group.leader_id].is_awaiting_join:
            return True
        for m in group.members.values():
            if m.is_awaiting_join:
                group.leader_id = m.member_id
                return True
        return False

    def _on_sync_deadline(self, group: GroupMetadata, generation: int) -> None:
        """Members that got a join response but never sent SyncGroup are removed."""
        if self.groups.get(group.group_id) is not group or group.generation_id != generation:
            return
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        group.sync_timer = None
        missing = list(group.pending_sync_members)
        if not missing:
            return
        for member_id in missing:
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member(group, member)
        self._prepare_rebalance(group, f"members {missing} did not send SyncGroup in time")

    def _complete_join(self, member: MemberMetadata, result: JoinGroupResult) -> None:
        fut, member.awaiting_join = member.awaiting_join, None
        _resolve(fut, result)

    def _complete_sync(self, member: MemberMetadata, result: SyncGroupResult) -> None:
        fut, member.awaiting_sync = member.awaiting_sync, None
        _resolve(fut, result)

    # --- membership removal and heartbeats ----------------------------------------------------------

    def _remove_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None
        group.remove(member.member_id)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata,
                                        reason: str) -> None:
        self._complete_join(member, JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        self._complete_sync(member, SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        self._remove_member(group, member)
        log.info("member %s left group %s (%s)", member.member_id, group.group_id, reason)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"removing member {member.member_id}: {reason}")
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata,
                            timeout_ms: int | None = None) -> None:
        member.last_heartbeat_ms = self.scheduler.now_ms()
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = self.scheduler.call_later(
            timeout, lambda: self._on_heartbeat_expired(group, member))

    def _on_heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if self.groups.get(group.group_id) is not group or \
                group.members.get(member.member_id) is not member or group.is_in(GroupState.DEAD):
            return
        # A known member parked in JoinGroup or SyncGroup is alive by definition: its request
        # is bounded by the rebalance, whose completion schedules its next expiry.
        if (member.is_awaiting_join and not member.is_new) or member.is_awaiting_sync:
            return
        self._remove_member_and_update_group(group, member, "session timeout expired")

    def _schedule_pending_member_expiry(self, group: GroupMetadata, member_id: str,
                                        timeout_ms: int) -> None:
        def fire() -> None:
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._try_complete_join(group)
        self.scheduler.call_later(timeout_ms, fire)

    # ==========================================================================================
    # SyncGroup, Heartbeat, LeaveGroup
    # ==========================================================================================

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         assignments: Mapping[str, bytes], *, group_instance_id: str | None = None,
                         protocol_type: str | None = None,
                         protocol_name: str | None = None) -> SyncGroupResult:
        err = self._validate(group_id)
        if err:
            return SyncGroupResult(err)
        group = self.groups.get(group_id)
        if group is None:
            return SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.DEAD):
            return SyncGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(group_instance_id, member_id):
            return SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID)
        if not group.has(member_id):
            return SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id != group.generation_id:
            return SyncGroupResult(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return SyncGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = group.get(member_id)
        if group.is_in(GroupState.EMPTY):
            return SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.is_in(GroupState.STABLE):
            group.pending_sync_members.discard(member_id)
            self._schedule_heartbeat(group, member)
            return SyncGroupResult(ErrorCode.NONE, member.assignment, group.protocol_type,
                                   group.protocol_name)
        # CompletingRebalance: park until the leader's assignment is persisted.
        fut: asyncio.Future[SyncGroupResult] = asyncio.get_running_loop().create_future()
        if member.awaiting_sync is not None:
            _resolve(member.awaiting_sync, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = fut
        group.pending_sync_members.discard(member_id)
        if group.is_leader(member_id):
            full = {m: bytes(assignments.get(m, b"")) for m in group.members}
            missing = [m for m in group.members if m not in assignments]
            if missing:
                log.warning("leader %s of group %s sent no assignment for %s", member_id, group_id,
                            missing)
            self._spawn(self._store_leader_assignment(group, generation_id, full))
        return await fut

    async def _store_leader_assignment(self, group: GroupMetadata, generation: int,
                                       assignment: dict[str, bytes]) -> None:
        try:
            await self._store_group(group, assignment)
            error = ErrorCode.NONE
        except Exception as e:
            log.warning("storing group %s assignment failed: %s", group.group_id, e)
            error = _map_store_error(e, commit=False)
        # Another member may have joined while we wrote: only a still-current generation in
        # CompletingRebalance becomes Stable.
        if not group.is_in(GroupState.COMPLETING_REBALANCE) or group.generation_id != generation:
            return
        if error:
            for m in group.members.values():
                m.assignment = b""
                self._complete_sync(m, SyncGroupResult(error))
            self._maybe_prepare_rebalance(group, "error storing the group assignment")
            return
        # replay() of the record just written has set each member's assignment.
        for m in group.members.values():
            self._complete_sync(m, SyncGroupResult(ErrorCode.NONE, m.assignment,
                                                   group.protocol_type, group.protocol_name))
            self._schedule_heartbeat(group, m)
        group.transition_to(GroupState.STABLE, self.scheduler.now_ms())
        log.info("group %s is Stable at generation %d", group.group_id, group.generation_id)

    def heartbeat(self, group_id: str, member_id: str, generation_id: int,
                  group_instance_id: str | None = None) -> ErrorCode:
        err = self._validate(group_id)
        if err:
            return err
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id) or group.is_in(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        self._schedule_heartbeat(group, group.get(member_id))
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE  # Stable, or CompletingRebalance (members heartbeat before sync)

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]],
                    reason: str | None = None) -> tuple[ErrorCode, list[LeaveMemberResult]]:
        """LeaveGroup for ``(member_id, group_instance_id)`` pairs (batched from v3, KIP-345).
        An empty member id with an instance id removes that static member (admin removal)."""
        err = self._validate(group_id)
        if err:
            return err, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [LeaveMemberResult(m, i, ErrorCode.UNKNOWN_MEMBER_ID)
                                    for m, i in members]
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
        why = f"leaving the group{f' ({reason})' if reason else ''}"
        for member_id, instance_id in members:
            if member_id == UNKNOWN_MEMBER_ID:
                current = group.static_member_id(instance_id)
                if current is None:
                    code = ErrorCode.UNKNOWN_MEMBER_ID
                else:
                    self._remove_member_and_update_group(group, group.get(current), why)
                    code = ErrorCode.NONE
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._try_complete_join(group)
                code = ErrorCode.NONE
            elif group.is_static_member_fenced(instance_id, member_id):
                code = ErrorCode.FENCED_INSTANCE_ID
            elif group.has(member_id):
                self._remove_member_and_update_group(group, group.get(member_id), why)
                code = ErrorCode.NONE
            else:
                code = ErrorCode.UNKNOWN_MEMBER_ID
            results.append(LeaveMemberResult(member_id, instance_id, code))
        return ErrorCode.NONE, results

    # ==========================================================================================
    # offsets
    # ==========================================================================================

    async def commit_offsets(self, group_id: str, member_id: str, generation_id: int,
                             offsets: Mapping[TopicPartition, OffsetAndMetadata], *,
                             group_instance_id: str | None = None,
                             retention_ms: int = -1) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit. ``generation_id`` -1 with an empty member id commits for a group that
        does not use the coordinator's membership (simple consumers, admin tools)."""
        def all_(code: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return dict.fromkeys(offsets, code)

        err = self._validate(group_id, allow_empty_id=True)
        if err:
            return all_(err)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # A generation the coordinator never issued.
                return all_(ErrorCode.ILLEGAL_GENERATION)
            group = GroupMetadata(group_id, current_state_timestamp=self.scheduler.now_ms())
            self.groups[group_id] = group
        elif group.is_in(GroupState.DEAD):
            return all_(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        elif group.is_static_member_fenced(group_instance_id, member_id):
            return all_(ErrorCode.FENCED_INSTANCE_ID)
        elif generation_id < 0 and group.is_in(GroupState.EMPTY):
            pass
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            # The member will get a new assignment: its offsets may be for partitions it loses.
            return all_(ErrorCode.REBALANCE_IN_PROGRESS)
        elif not group.has(member_id):
            return all_(ErrorCode.UNKNOWN_MEMBER_ID)
        elif generation_id != group.generation_id:
            return all_(ErrorCode.ILLEGAL_GENERATION)
        else:
            # PreparingRebalance is fine: members commit before they rejoin (onPartitionsRevoked).
            self._schedule_heartbeat(group, group.get(member_id))
        now = self.scheduler.now_ms()
        results: dict[TopicPartition, ErrorCode] = {}
        records: list[Record] = []
        for (topic, partition), om in offsets.items():
            metadata = om.metadata or ""
            if len(metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[(topic, partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            value = OffsetCommitValue(om.offset, metadata, now, om.leader_epoch,
                                      now + retention_ms if retention_ms >= 0 else -1)
            records.append(offset_commit_record(group_id, topic, partition, value))
            results[(topic, partition)] = ErrorCode.NONE
        if not records:
            return results
        try:
            await self._write(group_id, records)
        except Exception as e:
            code = _map_store_error(e, commit=True)
            log.warning("offset commit for group %s failed: %s", group_id, e)
            return {tp: (code if c == ErrorCode.NONE else c) for tp, c in results.items()}
        return results

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      require_stable: bool = False,
                      ) -> tuple[ErrorCode, dict[TopicPartition, PartitionOffset]]:
        """OffsetFetch. ``partitions=None`` means every partition with a committed offset.
        ``require_stable`` (KIP-447): a partition with transactional offsets awaiting their
        marker answers UNSTABLE_OFFSET_COMMIT, and the client retries."""
        err = self._validate(group_id, allow_empty_id=True)
        if err:
            return err, {}
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.NONE, {tp: PartitionOffset() for tp in partitions or []}
        if partitions is None:
            partitions = sorted(group.offsets)
        unstable: set[TopicPartition] = set()
        if require_stable:
            for pending in group.pending_txn_offsets.values():
                unstable.update(pending)
        out = {}
        for tp in partitions:
            om = group.offsets.get(tp)
            if tp in unstable:
                out[tp] = PartitionOffset(error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
            else:
                out[tp] = PartitionOffset() if om is None else \
                    PartitionOffset(om.offset, om.leader_epoch, om.metadata)
        return ErrorCode.NONE, out

    async def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 member_id: str, generation_id: int,
                                 group_instance_id: str | None,
                                 offsets: Mapping[TopicPartition, OffsetAndMetadata],
                                 ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: write the offsets now as one transactional batch; they become the
        group's committed offsets when the COMMIT marker arrives (:meth:`complete_transaction`)
        and vanish on ABORT. v3+ (KIP-447) sends member id and generation to fence zombies;
        an empty member id / generation -1 skips those checks, as in Kafka."""
        def all_(code: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return dict.fromkeys(offsets, code)

        err = self._validate(group_id)
        if err:
            return all_(err)
        group = self.groups.get(group_id)
        if group is None:
            group = GroupMetadata(group_id, current_state_timestamp=self.scheduler.now_ms())
            self.groups[group_id] = group
        if group.is_in(GroupState.DEAD):
            return all_(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(group_instance_id, member_id):
            return all_(ErrorCode.FENCED_INSTANCE_ID)
        if member_id != UNKNOWN_MEMBER_ID and not group.has(member_id):
            return all_(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id >= 0 and generation_id != group.generation_id:
            return all_(ErrorCode.ILLEGAL_GENERATION)
        now = self.scheduler.now_ms()
        results: dict[TopicPartition, ErrorCode] = {}
        records: list[Record] = []
        for (topic, partition), om in offsets.items():
            metadata = om.metadata or ""
            if len(metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[(topic, partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            records.append(offset_commit_record(group_id, topic, partition, OffsetCommitValue(
                om.offset, metadata, now, om.leader_epoch)))
            results[(topic, partition)] = ErrorCode.NONE
        if records:
            try:
                await self._write(group_id, records, producer_id=producer_id,
                                  producer_epoch=producer_epoch)
            except Exception as e:
                code = _map_store_error(e, commit=True)
                return {tp: (code if c == ErrorCode.NONE else c) for tp, c in results.items()}
        return results

    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """The marker of ``producer_id``'s transaction reached ``offsets_partition`` (live, or
        while loading): publish its pending offsets on COMMIT, drop them on ABORT."""
        self._seq += 1
        for group in self.groups.values():
            if self._partition(group.group_id) != offsets_partition:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if not pending or not commit:
                continue
            for tp, om in pending.items():
                current = group.offsets.get(tp)
                if current is None or current.seq < om.seq:
                    group.offsets[tp] = om

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition],
                             ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete (KIP-496): only offsets of topics the group does not consume."""
        err = self._validate(group_id)
        if err:
            return err, {}
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        results: dict[TopicPartition, ErrorCode] = {}
        if group.is_in(GroupState.EMPTY):
            subscribed: set[str] = set()
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            subscribed = self._subscribed_topics_all_protocols(group)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        records = []
        for tp in partitions:
            if tp[0] in subscribed:
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            results[tp] = ErrorCode.NONE
            if tp in group.offsets:
                records.append(offset_commit_record(group_id, tp[0], tp[1], None))
        if records:
            try:
                await self._write(group_id, records)
            except Exception as e:
                return _map_store_error(e, commit=False), {}
        return ErrorCode.NONE, results

    def _subscribed_topics_all_protocols(self, group: GroupMetadata) -> set[str]:
        topics: set[str] = set()
        for m in group.members.values():
            meta = m.metadata(group.protocol_name) if group.protocol_name else \
                (m.protocols[0][1] if m.protocols else b"")
            try:
                topics.update(parse_subscription_topics(meta))
            except Exception:
                pass
        return topics

    # ==========================================================================================
    # DescribeGroups, ListGroups, DeleteGroups
    # ==========================================================================================

    def describe_group(self, group_id: str) -> GroupDescription:
        err = self._validate(group_id, allow_empty_id=True)
        if err:
            return GroupDescription(group_id, err)
        group = self.groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, ErrorCode.NONE)  # Kafka: state Dead, no error
        stable = group.is_in(GroupState.STABLE)
        members = [MemberDescription(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.metadata(group.protocol_name) if stable else b"",
            m.assignment if stable else b"") for m in group.members.values()]
        return GroupDescription(group_id, ErrorCode.NONE, group.state.value,
                                group.protocol_type or "",
                                (group.protocol_name or NO_PROTOCOL) if stable else NO_PROTOCOL,
                                members)

    def list_groups(self, states: Iterable[str] | None = None,
                    types: Iterable[str] | None = None) -> tuple[ErrorCode, list[GroupListing]]:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        wanted = {s.lower() for s in states} if states else None
        wanted_types = {t.lower() for t in types} if types else None
        out = []
        for g in self.groups.values():
            if wanted is not None and g.state.value.lower() not in wanted:
                continue
            if wanted_types is not None and "classic" not in wanted_types:
                continue
            out.append(GroupListing(g.group_id, g.protocol_type or "", g.state.value))
        return (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self._loading else ErrorCode.NONE), out

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            err = self._validate(group_id, allow_empty_id=True)
            if err:
                results[group_id] = err
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
                continue
            if not group.is_in(GroupState.EMPTY):
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
                continue
            group.transition_to(GroupState.DEAD, self.scheduler.now_ms())
            records = [offset_commit_record(group_id, t, p, None) for t, p in group.offsets]
            records.append(group_metadata_record(group_id, None))
            try:
                await self._write(group_id, records)
                results[group_id] = ErrorCode.NONE
            except Exception as e:
                # Like Kafka, the group is gone from memory either way; the tombstones are lost.
                self._drop_group(group_id)
                results[group_id] = _map_store_error(e, commit=False)
        return results

    # ==========================================================================================
    # retention
    # ==========================================================================================

    def _schedule_retention(self) -> None:
        def fire() -> None:
            if self.active:
                self._spawn(self.expire_offsets())
                self._schedule_retention()
        self._retention_timer = self.scheduler.call_later(
            self.config.offsets_retention_check_interval_ms, fire)

    async def expire_offsets(self) -> int:
        """``offsets.retention.minutes`` (KIP-211): an Empty group's offsets expire that long after
        it became Empty; a live consumer group's offsets expire only for topics it no longer
        subscribes to. An explicit expire timestamp (OffsetCommit v2-v4) wins. An Empty group
        left with no offsets is deleted. Returns the number of offsets removed."""
        now = self.scheduler.now_ms()
        retention = self.config.offsets_retention_minutes * 60_000
        removed = 0
        for group in list(self.groups.values()):
            if self._partition(group.group_id) not in self._owned or group.is_in(GroupState.DEAD):
                continue
            if group.is_in(GroupState.EMPTY):
                subscribed: set[str] = set()
            elif group.is_in(GroupState.STABLE) and group.subscribed_topics() is not None:
                subscribed = group.subscribed_topics() or set()
            else:
                continue
            expired = []
            for tp, om in group.offsets.items():
                if tp[0] in subscribed:
                    continue
                if om.expire_timestamp >= 0:
                    if now >= om.expire_timestamp:
                        expired.append(tp)
                    continue
                base = group.current_state_timestamp \
                    if group.is_in(GroupState.EMPTY) and group.current_state_timestamp >= 0 \
                    else om.commit_timestamp
                if now - base >= retention:
                    expired.append(tp)
            records = [offset_commit_record(group.group_id, t, p, None) for t, p in expired]
            drop_group = group.is_in(GroupState.EMPTY) and len(expired) == len(group.offsets) \
                and not group.pending_members
            if drop_group:
                group.transition_to(GroupState.DEAD, now)
                records.append(group_metadata_record(group.group_id, None))
            if not records:
                continue
            try:
                await self._write(group.group_id, records)
                removed += len(expired)
            except Exception as e:
                log.warning("expiring offsets of group %s failed: %s", group.group_id, e)
        return removed

    # ==========================================================================================
    # records: write, then replay
    # ==========================================================================================

    async def _write(self, group_id: str, records: list[Record], *, producer_id: int = -1,
                     producer_epoch: int = -1) -> None:
        if producer_id >= 0:
            await self.storage.append(self._partition(group_id), records, producer_id=producer_id,
                                      producer_epoch=producer_epoch)
        else:
            await self.storage.append(self._partition(group_id), records)
        for key, value in records:
            self.replay(key, value, producer_id=producer_id)

    def _group_record(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> Record:
        members = [MemberMetadataRecord(
            m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            m.session_timeout_ms, m.metadata(group.protocol_name),
            bytes(assignment.get(m.member_id, b""))) for m in group.members.values()] \
            if group.protocol_name is not None else []
        value = GroupMetadataValue(group.protocol_type or "", group.generation_id,
                                   group.protocol_name,
                                   group.leader_id if group.protocol_name is not None else None,
                                   group.current_state_timestamp, members)
        return group_metadata_record(group.group_id, value)

    async def _store_group(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> None:
        await self._write(group.group_id, [self._group_record(group, assignment)])

    async def _store_group_logged(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> None:
        try:
            await self._store_group(group, assignment)
        except Exception as e:
            log.warning("storing metadata of group %s failed: %s", group.group_id, e)

    def replay(self, key: bytes, value: bytes | None, *, producer_id: int = -1) -> None:
        """Apply one ``__consumer_offsets`` record: the single path for live updates and loading.

        A record of a transactional batch (``producer_id`` >= 0) is an offset that stays pending
        until :meth:`complete_transaction` sees the transaction's marker.

        GroupMetadata semantics: while the partition loads, each record rebuilds the group (the
        last one wins; committed offsets, which are separate records, are kept). Live, a record
        for the in-memory group's generation carries that generation's persisted assignment, which
        is what SyncGroup then hands out; a record for another generation, or for a group not in
        memory, rebuilds the group as at load time.
        """
        k = decode_key(key)
        if k is None:
            return
        self._seq += 1
        if isinstance(k, OffsetCommitKey):
            group = self.groups.get(k.group)
            tp = (k.topic, k.partition)
            if value is None:
                if group is not None:
                    group.offsets.pop(tp, None)
                return
            v = OffsetCommitValue.decode(value)
            if group is None:
                group = GroupMetadata(k.group, current_state_timestamp=v.commit_timestamp)
                self.groups[k.group] = group
            om = OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                                   v.expire_timestamp, self._seq)
            if producer_id >= 0:
                group.pending_txn_offsets.setdefault(producer_id, {})[tp] = om
            else:
                group.offsets[tp] = om
            return
        assert isinstance(k, GroupMetadataKey)
        if value is None:
            self._drop_group(k.group)
            return
        gv = GroupMetadataValue.decode(value)
        group = self.groups.get(k.group)
        loading = self._partition(k.group) in self._loading
        if loading or group is None or group.generation_id != gv.generation \
                or group.is_in(GroupState.DEAD):
            self._rebuild_group(k.group, gv, group)
        else:
            # Live: the record describes the in-memory group at the time it was written; what
            # it adds is the persisted assignment of this generation.
            for mr in gv.members:
                m = group.members.get(mr.member_id)
                if m is not None:
                    m.assignment = mr.assignment

    def _member_from_record(self, mr: MemberMetadataRecord, gv: GroupMetadataValue) -> MemberMetadata:
        protocols = [(gv.protocol, mr.subscription)] if gv.protocol is not None else []
        return MemberMetadata(mr.member_id, mr.group_instance_id, mr.client_id, mr.client_host,
                              mr.rebalance_timeout, mr.session_timeout, gv.protocol_type, protocols,
                              assignment=mr.assignment)

    def _rebuild_group(self, group_id: str, gv: GroupMetadataValue,
                       old: GroupMetadata | None) -> None:
        if old is not None:
            self._unload_group(old)
        state = GroupState.STABLE if gv.members else GroupState.EMPTY
        group = GroupMetadata(
            group_id, state=state,
            current_state_timestamp=gv.current_state_timestamp if gv.current_state_timestamp >= 0
            else self.scheduler.now_ms(),
            protocol_type=gv.protocol_type or None, protocol_name=gv.protocol,
            generation_id=gv.generation)
        if old is not None:
            group.offsets = old.offsets
        for mr in gv.members:
            group.add(self._member_from_record(mr, gv))
        group.leader_id = gv.leader if gv.leader in group.members else group.leader_id
        self.groups[group_id] = group
        if self._partition(group_id) in self._owned:
            for m in group.members.values():
                self._schedule_heartbeat(group, m)

    def _drop_group(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        self._unload_group(group)
        if not group.is_in(GroupState.DEAD):
            group.transition_to(GroupState.DEAD, self.scheduler.now_ms())


@dataclass(slots=True)
class _JoinArgs:
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    reason: str | None
    supports_skip_assignment: bool

