"""Share sessions (KIP-932; Kafka's ``ShareSessionCache``): which partitions a share consumer
fetches from this broker, so that a ShareFetch need not list them every time.

A session is keyed by (group id, member id). ShareFetch with epoch 0 opens it (replacing one the
member had) with the partitions it names; every later ShareFetch or ShareAcknowledge carries
the next epoch (1, 2, ... wrapping from 2**31-1 to 1), may add partitions and forget others;
epoch -1 closes it (after its acknowledgements), and the member's acquired records are released
-- as they are when the connection that opened the session closes (Kafka's disconnect listener),
so a consumer that dies hands its records on at once rather than after its locks time out.
A session that is not there is SHARE_SESSION_NOT_FOUND; a wrong epoch
INVALID_SHARE_SESSION_EPOCH. At most ``group.share.max.share.sessions`` sessions are kept: a new
one evicts the least recently used. No I/O.
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
TopicIdPartition = tuple[uuid.UUID, int]


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the next request must carry
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)  # ordered set
    last_used: float = 0.0
    connection: object = None  # the connection that opened it (its peer address)


class ShareSessionCache:
    def __init__(self, max_entries: int = 2000) -> None:
        self.max_entries = max_entries
        self.sessions: OrderedDict[tuple[str, str], ShareSession] = OrderedDict()

    def open(self, group_id: str, member_id: str, partitions: list[TopicIdPartition],
             connection: object = None) -> tuple[ShareSession, ShareSession | None]:
        """A new session at epoch 0 (the next request carries 1); also the one it replaced."""
        key = (group_id, member_id)
        old = self.sessions.pop(key, None)
        evicted = None
        if old is None and len(self.sessions) >= self.max_entries:
            _, evicted = self.sessions.popitem(last=False)
        s = ShareSession(group_id, member_id, 1, dict.fromkeys(partitions), time.monotonic(), connection)
        self.sessions[key] = s
        return s, old or evicted

    def use(self, group_id: str, member_id: str, epoch: int) -> tuple[ErrorCode, ShareSession | None]:
        """The session a request with ``epoch`` (> 0, or -1 to close) continues."""
        key = (group_id, member_id)
        s = self.sessions.get(key)
        if s is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        if epoch == FINAL_EPOCH:
            return ErrorCode.NONE, s
        if epoch != s.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        s.epoch = next_epoch(epoch)
        s.last_used = time.monotonic()
        self.sessions.move_to_end(key)
        return ErrorCode.NONE, s

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def of_connection(self, connection: object) -> list[ShareSession]:
        return [s for s in self.sessions.values() if s.connection == connection]

    def of_group(self, group_id: str) -> list[ShareSession]:
        return [s for (g, _m), s in self.sessions.items() if g == group_id]
