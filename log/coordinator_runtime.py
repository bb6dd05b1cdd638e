"""The coordinators' write path: apply a record once, when it is written; replay only on load.

Kafka's coordinators (group, share, transaction) keep their state as records in an internal
topic. Kafka's ``CoordinatorRuntime`` writes them with one rule, which every Samsa coordinator
follows through :meth:`CoordinatorRuntime.write`:

* **Apply at write time, once.** A write appends its records to the leader's log and applies
  them to the in-memory state (through the coordinator's ``replay()``, the code that rebuilds
  the state when a partition is loaded) *in the same event-loop step*: nothing else can run in
  between, so the state always equals the log, in log order. The write then waits until the
  high watermark passes the records (acks=all) and only then answers the client. A record is
  **never** applied again when its replication completes: by then the coordinator may have
  moved on (a newer generation, a later offset commit), and replaying the older record would
  overwrite the newer state -- a classic group's generation went backwards that way.
* **Revert if the write fails.** Kafka applies before appending and reverts on an append error.
  Samsa appends first (the local append is synchronous) and applies only once it succeeded, so
  a failed append has nothing to revert. A record that reached the leader's log stays applied
  even if its replication then times out, as in Kafka: it is in the log and will be committed
  with the records after it, or the partition's leadership moves and the coordinator unloads
  the partition (its state is rebuilt from the new leader's log). The transaction coordinator
  reverts such a transition (it holds other writers of the id off until then), as Kafka's
  does, so that the client's retry writes it again.
* **Visible to readers once committed.** What readers must not see before it is durable (a
  committed offset that OffsetFetch hands to another consumer) is kept in a
  :class:`TimelineDict`: writers see the latest value, readers ask for the value as of the
  partition's last committed offset (:class:`SnapshotRegistry`), Kafka's ``TimelineHashMap``.
* **Replay only on load.** ``replay()`` rebuilds the state when a partition is loaded (broker
  start, coordinator election); live, it runs only inside :meth:`CoordinatorRuntime.write`.

A storage's ``append`` takes an ``on_appended(last_offset)`` callback, which it must call
synchronously right after the local append and before waiting for replication; the runtime
applies the records there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from enum import Enum
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")

OnAppended = Callable[[int], None]



class _Absent(Enum):
    """A key that had no value (before a write added it), distinct from any value."""

    ABSENT = 0


class SnapshotRegistry:
    """One coordinator partition's offsets: the last one written and the last one committed.

    Invariant: ``committed_offset <= last_written_offset``; ``write_epoch`` is the offset of the
    write being applied (None outside a write: changes then count as already committed).
    """

    __slots__ = ("committed_offset", "last_written_offset", "write_epoch")

    def __init__(self) -> None:
        self.committed_offset = -1
        self.last_written_offset = -1
        self.write_epoch: int | None = None

    def commit(self, offset: int) -> None:
        """The high watermark passed ``offset``: everything up to it is committed."""
        if offset > self.committed_offset:
            self.committed_offset = offset

    @property
    def pending(self) -> bool:
        return self.last_written_offset > self.committed_offset


class TimelineDict(MutableMapping[K, V], Generic[K, V]):
    """A dict whose readers can see it as of the registry's committed offset.

    Writers use it as a dict (the latest state). A change made while a write is being applied
    (``registry.write_epoch`` set and not yet committed) keeps the value it replaced, so that
    :meth:`committed_get` / :meth:`committed_items` can answer as if that write had not happened
    until it is committed. History older than the committed offset is dropped as it is read.
    """

    __slots__ = ("_latest", "_history", "registry")

    def __init__(self, registry: SnapshotRegistry, initial: MutableMapping[K, V] | None = None) -> None:
        self.registry = registry
        self._latest: dict[K, V] = dict(initial or {})
        # key -> [(write epoch, value before that write or ABSENT)], oldest first
        self._history: dict[K, list[tuple[int, V | _Absent]]] = {}

    def _record(self, key: K) -> None:
        epoch = self.registry.write_epoch
        committed = self.registry.committed_offset
        hist = self._history.get(key)
        if hist:  # what is committed needs no history: it stays as long as writes are pending
            while hist and hist[0][0] <= committed:
                hist.pop(0)
            if not hist:
                del self._history[key]
        if epoch is None or epoch <= committed:
            return
        hist = self._history.setdefault(key, [])
        if hist and hist[-1][0] == epoch:
            return  # this write already saved the value it replaces
        hist.append((epoch, self._latest.get(key, _Absent.ABSENT)))

    def __setitem__(self, key: K, value: V) -> None:
        self._record(key)
        self._latest[key] = value

    def __delitem__(self, key: K) -> None:
        if key not in self._latest:
            raise KeyError(key)
        self._record(key)
        del self._latest[key]

    def __getitem__(self, key: K) -> V:
        return self._latest[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._latest)

    def __len__(self) -> int:
        return len(self._latest)

    def __contains__(self, key: object) -> bool:
        return key in self._latest

    def __repr__(self) -> str:
        return f"TimelineDict({self._latest!r})"

    def _committed(self, key: K) -> V | _Absent:
        hist = self._history.get(key)
        if hist:
            committed = self.registry.committed_offset
            while hist and hist[0][0] <= committed:
                hist.pop(0)
            if hist:
                return hist[0][1]
            del self._history[key]
        return self._latest.get(key, _Absent.ABSENT)

    def committed_get(self, key: K, default: D | None = None) -> V | D | None:
        """The value as of the last committed offset."""
        v = self._committed(key)
        return default if v is _Absent.ABSENT else v

    def committed_items(self) -> dict[K, V]:
        """Every entry as of the last committed offset."""
        out: dict[K, V] = {}
        for key in list(self._latest) + [k for k in self._history if k not in self._latest]:
            v = self._committed(key)
            if v is not _Absent.ABSENT:
                out[key] = v
        return out


def committed_view(d: MutableMapping[K, V]) -> MutableMapping[K, V]:
    """``d`` as readers may see it: its committed entries if it is a :class:`TimelineDict`."""
    return d.committed_items() if isinstance(d, TimelineDict) else d


class CoordinatorRuntime:
    """The write path of one coordinator over the partitions of its internal topic."""

    def __init__(self) -> None:
        self._registries: dict[int, SnapshotRegistry] = {}

    def registry(self, partition: int) -> SnapshotRegistry:
        reg = self._registries.get(partition)
        if reg is None:
            reg = self._registries[partition] = SnapshotRegistry()
        return reg

    def unload(self, partition: int) -> None:
        """The partition's leadership moved: its history goes with its state."""
        self._registries.pop(partition, None)

    def apply_at(self, partition: int, offset: int, apply: Callable[[], None]) -> None:
        """Apply a change that belongs to the record at ``offset`` (just appended to the leader's
        log): readers of :class:`TimelineDict` values see it once :meth:`committed` passes it."""
        reg = self.registry(partition)
        if offset > reg.last_written_offset:
            reg.last_written_offset = offset
        previous, reg.write_epoch = reg.write_epoch, offset
        try:
            apply()
        finally:
            reg.write_epoch = previous

    def committed(self, partition: int, offset: int) -> None:
        reg = self._registries.get(partition)
        if reg is not None:
            reg.commit(offset)

    async def write(self, partition: int, append: Callable[[OnAppended], Awaitable[object]],
                    apply: Callable[[], None] | None) -> int:
        """Append records through ``append(on_appended)`` and apply them with ``apply()`` when
        the storage reports the local append; return once they are committed (the storage's
        append returned). Returns the last offset of the records.

        ``apply`` None: the caller's in-memory state already is the truth and the records only
        persist it (Kafka's ``replayRecords = false``, classic groups' GroupMetadata)."""
        appended: list[int] = []

        def on_appended(last_offset: int) -> None:
            if appended:
                raise AssertionError("a storage reported one append twice")
            appended.append(last_offset)
            self.apply_at(partition, last_offset, apply or (lambda: None))

        await append(on_appended)
        if not appended:
            raise AssertionError("the storage did not report its append (on_appended)")
        self.committed(partition, appended[0])
        return appended[0]
