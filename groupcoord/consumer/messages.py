"""What the consumer-group coordinator (KIP-848) takes and gives, apart from the wire.

Theory of operation: ``broker/apis`` decodes ConsumerGroupHeartbeat and ConsumerGroupDescribe
into these plain objects and encodes the results back; :mod:`groupcoord.consumer.manager` works
only with them, so the coordinator is tested without a socket and does not depend on a
message version. Assignments are ``topic id -> partitions`` (:data:`group.Assignment`); owned
partitions as a heartbeat reports them are :data:`reconciliation.Owned` (``None`` = not sent).

Invariants: these objects carry data only; a result's ``assignment`` is ``None`` unless the
response must carry the member's assignment (the manager decides when).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from protocol.errors import ErrorCode, KafkaError

from .group import Assignment
from .reconciliation import Owned


class GroupError(KafkaError):
    """A heartbeat refused with a Kafka error code and message."""


@dataclass(slots=True)
class ConsumerGroupHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: Owned = None


@dataclass(slots=True)
class ConsumerGroupHeartbeatResult:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass(slots=True)
class ConsumerMemberDescription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    assignment: list[tuple[uuid.UUID, str, list[int]]]
    target_assignment: list[tuple[uuid.UUID, str, list[int]]]
    uses_classic_protocol: bool = False


@dataclass(slots=True)
class ConsumerGroupDescription:
    group_id: str
    error: ErrorCode
    error_message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: list[ConsumerMemberDescription] = field(default_factory=list)


