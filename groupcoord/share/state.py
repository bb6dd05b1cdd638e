"""Kafka's share coordinator: share-partition state in ``__share_group_state`` (KIP-932).

Theory of operation
-------------------
A share-partition's durable state is its start offset (SPSO) and the state batches of its
in-flight records -- ``(first offset, last offset, delivery state, delivery count)`` -- keyed by
``(group id, topic id, partition)``. It lives in the internal topic ``__share_group_state``
(``share.coordinator.state.topic.num.partitions``, partition chosen by the hash of
``"group:topicId:partition"`` as Kafka does), as two record types:

====  ============================  ==================================================
 0    ShareSnapshotKey (g, t, p)    the whole state: start offset and every batch
 1    ShareUpdateKey (g, t, p)      the batches that changed (and the start offset)
====  ============================  ==================================================

Values are flexible version-0 structs (``ShareSnapshotValue`` / ``ShareUpdateValue`` in
:mod:`protocol.kip932`) preceded by their int16 version; a ``None`` value deletes the state.
:meth:`ShareCoordinator.replay` applies a snapshot by replacing the state and an update by
laying its batches over it (cutting what they overlap) and dropping batches below the start
offset -- the same method for live writes (applied once, as the record enters the leader's log,
never again when it is replicated: :mod:`log.coordinator_runtime`) and for loading the topic. After
``share.coordinator.snapshot.update.records.per.snapshot`` updates the writer writes a snapshot
instead, so loading never replays an unbounded chain.

The coordinator only stores: what the states mean is :mod:`broker.share.partition`'s business.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from kafka.protocol.data_container import DataContainer

from log.coordinator_runtime import CoordinatorRuntime, OnAppended
from protocol import kafka_uuid, kip932

from ..records import Record, _Reader, _Writer, java_abs, java_string_hashcode

log = logging.getLogger("groupcoord.share.state")

SHARE_STATE_TOPIC = "__share_group_state"
SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1
StateBatch = tuple[int, int, int, int]
SharePartitionKey = tuple[str, uuid.UUID, int]


@dataclass(slots=True)
class ShareState:
    """One share-partition's persisted state."""

    start_offset: int
    batches: list[StateBatch] = field(default_factory=list)
    state_epoch: int = 0
    leader_epoch: int = -1
    snapshot_epoch: int = 0
    updates_since_snapshot: int = 0


def encode_key(kind: int, key: SharePartitionKey) -> bytes:
    w = _Writer()
    w.int16(kind)
    w.string(key[0])
    w.buf += key[1].bytes
    w.int32(key[2])
    return bytes(w.buf)


def decode_key(data: bytes) -> tuple[int, SharePartitionKey]:
    (kind,) = struct.unpack_from(">h", data, 0)
    if kind not in (SHARE_SNAPSHOT, SHARE_UPDATE):
        raise ValueError(f"unknown __share_group_state key version {kind}")
    r = _Reader(data, 2)
    group = r.string()
    topic_id = uuid.UUID(bytes=bytes(data[r.pos:r.pos + 16]))
    r.pos += 16
    return kind, (group, topic_id, r.int32())


def _batches(cls: type[DataContainer], batches: Iterable[StateBatch]) -> list[DataContainer]:
    return [cls(first_offset=f, last_offset=la, delivery_state=s, delivery_count=c)
            for f, la, s, c in batches]


def snapshot_record(key: SharePartitionKey, state: ShareState | None) -> Record:
    k = encode_key(SHARE_SNAPSHOT, key)
    if state is None:
        return k, None
    now = int(time.time() * 1000)
    v = kip932.ShareSnapshotValue
    value = v(snapshot_epoch=state.snapshot_epoch, state_epoch=state.state_epoch,
              leader_epoch=state.leader_epoch, start_offset=state.start_offset,
              create_timestamp=now, write_timestamp=now,
              state_batches=_batches(v.StateBatch, state.batches))
    return k, struct.pack(">h", 0) + bytes(value.encode(version=0, header=False))


def update_record(key: SharePartitionKey, snapshot_epoch: int, leader_epoch: int,
                  start_offset: int, batches: list[StateBatch]) -> Record:
    v = kip932.ShareUpdateValue
    value = v(snapshot_epoch=snapshot_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
              state_batches=_batches(v.StateBatch, batches))
    return (encode_key(SHARE_UPDATE, key),
            struct.pack(">h", 0) + bytes(value.encode(version=0, header=False)))


def overlay(base: list[StateBatch], changes: list[StateBatch], start_offset: int) -> list[StateBatch]:
    """``base`` with ``changes`` laid over it (each change replaces the offsets it covers),
    without anything below ``start_offset``."""
    out: list[StateBatch] = []
    cuts = sorted(changes)
    for f, la, s, c in base:
        pieces = [(f, la)]
        for cf, cl, _s, _c in cuts:
            nxt = []
            for pf, pl in pieces:
                if cl < pf or cf > pl:
                    nxt.append((pf, pl))
                    continue
                if pf < cf:
                    nxt.append((pf, cf - 1))
                if cl < pl:
                    nxt.append((cl + 1, pl))
            pieces = nxt
        out += [(pf, pl, s, c) for pf, pl in pieces]
    out += cuts
    clipped = []
    for f, la, s, c in sorted(out):
        if la < start_offset:
            continue
        clipped.append((max(f, start_offset), la, s, c))
    return clipped


class ShareStateStorage(Protocol):
    async def ensure(self) -> None: ...  # the topic exists (created on first need)
    # Calls on_appended(last offset) once the records are in the leader's log, returns once
    # they are replicated.
    async def append(self, partition: int, records: list[Record], *,
                     on_appended: OnAppended | None = None) -> int: ...
    def read_all(self, partition: int) -> Iterator[Record]: ...


class ShareCoordinator:
    """Owner of ``__share_group_state``: every write goes through :meth:`write`, applied by
    :meth:`replay` as it is appended; loading replays the same records."""

    def __init__(self, storage: ShareStateStorage, num_partitions: int = 50,
                 updates_per_snapshot: int = 500) -> None:
        self.storage = storage
        self.num_partitions = num_partitions
        self.updates_per_snapshot = updates_per_snapshot
        self.states: dict[SharePartitionKey, ShareState] = {}
        self._loaded: set[int] = set()
        self._locks: dict[int, asyncio.Lock] = {}
        self.runtime = CoordinatorRuntime()

    def partition_for(self, key: SharePartitionKey) -> int:
        text = f"{key[0]}:{kafka_uuid.to_string(key[1])}:{key[2]}"
        return java_abs(java_string_hashcode(text)) % self.num_partitions

    # --- lifecycle ------------------------------------------------------------------------------------

    async def on_election(self, partition: int) -> None:
        if partition in self._loaded:
            return
        self._loaded.add(partition)
        n = 0
        for key, value in self.storage.read_all(partition):
            try:
                self.replay(key, value)
            except (ValueError, IndexError, struct.error) as e:
                log.warning("skipping unreadable %s record in partition %d: %s",
                            SHARE_STATE_TOPIC, partition, e)
            n += 1
            if n % 1000 == 0:
                await asyncio.sleep(0)

    def unload(self, partition: int) -> None:
        """Another broker leads ``partition`` now: forget its states (they are replayed there)."""
        self._loaded.discard(partition)
        self.runtime.unload(partition)
        for key in [k for k in self.states if self.partition_for(k) == partition]:
            del self.states[key]

    async def ensure_loaded(self, key: SharePartitionKey) -> None:
        """The partition holding ``key``'s state exists and has been replayed."""
        p = self.partition_for(key)
        if p not in self._loaded:
            await self.storage.ensure()
            await self.on_election(p)

    # --- reads and writes -----------------------------------------------------------------------------

    def read_state(self, key: SharePartitionKey) -> ShareState | None:
        return self.states.get(key)

    async def initialize(self, key: SharePartitionKey, start_offset: int, leader_epoch: int) -> None:
        """A share-partition's first state (Kafka's InitializeShareGroupState): a snapshot."""
        await self._append(key, [snapshot_record(key, ShareState(start_offset, [], 0, leader_epoch))])

    async def write(self, key: SharePartitionKey, start_offset: int, batches: list[StateBatch],
                    leader_epoch: int = -1) -> None:
        """Record a change (Kafka's WriteShareGroupState): an update, or every
        ``updates_per_snapshot`` changes a snapshot of the merged state."""
        cur = self.states.get(key)
        if cur is None or cur.updates_since_snapshot + 1 >= self.updates_per_snapshot:
            merged = overlay(cur.batches if cur else [], batches, start_offset)
            snap = ShareState(start_offset, merged, cur.state_epoch if cur else 0, leader_epoch,
                              (cur.snapshot_epoch + 1) if cur else 0)
            await self._append(key, [snapshot_record(key, snap)])
        else:
            await self._append(key, [update_record(key, cur.snapshot_epoch, leader_epoch,
                                                   start_offset, batches)])

    async def delete(self, keys: Iterable[SharePartitionKey]) -> None:
        """Forget share-partitions (a deleted group, or offsets deleted): tombstones."""
        for key in list(keys):
            if key in self.states:
                await self._append(key, [snapshot_record(key, None)])

    async def _append(self, key: SharePartitionKey, records: list[Record]) -> None:
        p = self.partition_for(key)
        def apply() -> None:
            for k, v in records:
                self.replay(k, v)

        async with self._locks.setdefault(p, asyncio.Lock()):
            await self.runtime.write(
                p, lambda on_appended: self.storage.append(p, records, on_appended=on_appended),
                apply)

    # --- replay -----------------------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        kind, spk = decode_key(key)
        if value is None:
            self.states.pop(spk, None)
            return
        (version,) = struct.unpack_from(">h", value, 0)
        if version != 0:
            raise ValueError(f"unknown {SHARE_STATE_TOPIC} value version {version}")
        if kind == SHARE_SNAPSHOT:
            v = kip932.ShareSnapshotValue.decode(value[2:], version=0, header=False)
            self.states[spk] = ShareState(
                v.start_offset, [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                 for b in v.state_batches or []],
                v.state_epoch, v.leader_epoch, v.snapshot_epoch, 0)
            return
        u = kip932.ShareUpdateValue.decode(value[2:], version=0, header=False)
        cur = self.states.get(spk)
        if cur is None:  # an update without its snapshot (deleted before it): ignored, as Kafka
            return
        start = u.start_offset if u.start_offset >= 0 else cur.start_offset
        cur.batches = overlay(cur.batches, [(b.first_offset, b.last_offset, b.delivery_state,
                                             b.delivery_count) for b in u.state_batches or []],
                              start)
        cur.start_offset = start
        cur.leader_epoch = u.leader_epoch
        cur.updates_since_snapshot += 1
