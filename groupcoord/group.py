"""One classic group's in-memory state: members, protocols, generation, leader, offsets.

Invariants: ``state`` changes only through :meth:`GroupMetadata.transition_to`; a member id
appears in ``static_members`` values only if that member exists and carries that instance id;
``leader_id`` is a current member or None; ``supported_protocols[p]`` counts the members that
list protocol ``p``. These objects never do I/O and never schedule timers: the coordinator owns
both, and is the only code that mutates a group.
"""

from __future__ import annotations

import asyncio
import struct
from collections import Counter
from collections.abc import MutableMapping
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

from .state import GroupState, check_transition
from .timer import TimerHandle

CONSUMER_PROTOCOL_TYPE = "consumer"
UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
NO_PROTOCOL = ""


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
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1
    # Position of the record in replay (= log) order; a transaction's offsets win over a plain
    # commit only if they were written after it, as Kafka compares log offsets.
    seq: int = 0


@dataclass(eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    # A member that joined but has not yet completed a join: its heartbeat deadline is the
    # (long) new-member timeout rather than its session timeout (KIP-394).
    is_new: bool = False
    awaiting_join: asyncio.Future[JoinGroupResult] | None = None
    awaiting_sync: asyncio.Future[SyncGroupResult] | None = None
    last_heartbeat_ms: int = 0
    heartbeat_timer: TimerHandle | None = None
    join_reason: str | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """This member's most preferred protocol among the ones every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass(eq=False)
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    current_state_timestamp: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)  # ids given by MEMBER_ID_REQUIRED
    pending_sync_members: set[str] = field(default_factory=set)
    supported_protocols: Counter[str] = field(default_factory=Counter)
    offsets: MutableMapping[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    # TxnOffsetCommit offsets written but not yet committed, by producer id (KIP-98/447).
    pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    # Rebalance bookkeeping, owned by the coordinator.
    new_member_added: bool = False
    initial_join_delay: bool = False
    join_timer: TimerHandle | None = None
    sync_timer: TimerHandle | None = None

    # --- state ------------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        check_transition(self.state, target)
        self.state = target
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in GroupState.PREPARING_REBALANCE.valid_previous_states

    # --- members ----------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def size(self) -> int:
        return len(self.members)

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        assert self.protocol_type == member.protocol_type, "protocol type checked before add"
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.supported_protocols.update(member.protocol_names())
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.supported_protocols.subtract(member.protocol_names())
        self.supported_protocols = +self.supported_protocols  # drop zero counts
        if member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync_members.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = self._pick_leader()
        return member

    def _pick_leader(self) -> str | None:
        joined = [m for m in self.members.values() if m.is_awaiting_join]
        candidates = joined or list(self.members.values())
        return candidates[0].member_id if candidates else None

    def update_member(self, member: MemberMetadata, protocols: list[tuple[str, bytes]],
                      rebalance_timeout_ms: int, session_timeout_ms: int) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        self.supported_protocols = +self.supported_protocols
        member.protocols = list(protocols)
        self.supported_protocols.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str,
                              ) -> MemberMetadata:
        """Give a restarted static member a new member id, keeping its metadata and assignment."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_member_fenced(self, instance_id: str | None, member_id: str) -> bool:
        """A request naming an instance id that now belongs to another member id (KIP-345)."""
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    # --- protocols --------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, count in self.supported_protocols.items() if count == n}

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        names = {n for n, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (one vote each)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError("no protocol supported by every member")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        # Ties go to the preference of the earliest member, so the choice is deterministic.
        first = next(iter(self.members.values()))
        for name, _ in first.protocols:
            if votes.get(name) == best:
                return name
        return max(votes, key=lambda p: votes[p])

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        return (all(m.is_awaiting_join for m in self.members.values())
                and not self.pending_members)

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, if this is a ``consumer`` group whose subscriptions
        we can parse; None when unknown (then no offset is protected from expiry by it)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics.update(parse_subscription_topics(m.metadata(self.protocol_name)))
        except (ValueError, struct.error):
            return None
        return topics


def parse_subscription_topics(metadata: bytes) -> list[str]:
    """Topic names from a ConsumerProtocolSubscription (``version int16, topics [string], ...``)."""
    pos = 2
    (n,) = struct.unpack_from(">i", metadata, pos)
    pos += 4
    topics = []
    for _ in range(max(n, 0)):
        (ln,) = struct.unpack_from(">h", metadata, pos)
        pos += 2
        if ln < 0 or pos + ln > len(metadata):
            raise ValueError("bad subscription")
        topics.append(metadata[pos:pos + ln].decode("utf-8"))
        pos += ln
    return topics


def parse_assignment(assignment: bytes) -> list[tuple[str, list[int]]]:
    """Partitions from a ConsumerProtocolAssignment (``version, [topic, [partition]], userdata``)."""
    if len(assignment) < 6:
        return []
    pos = 2
    (n,) = struct.unpack_from(">i", assignment, pos)
    pos += 4
    out = []
    for _ in range(max(n, 0)):
        (ln,) = struct.unpack_from(">h", assignment, pos)
        pos += 2
        topic = assignment[pos:pos + ln].decode("utf-8")
        pos += ln
        (np,) = struct.unpack_from(">i", assignment, pos)
        pos += 4
        parts = list(struct.unpack_from(f">{max(np, 0)}i", assignment, pos))
        pos += 4 * max(np, 0)
        out.append((topic, parts))
    return out
