"""The log cleaner's offset map: key digest -> latest offset (Kafka's SkimpyOffsetMap).

Theory of operation: a fixed-size open-addressing table of 16-byte slots (an 8-byte BLAKE2b
digest of the record key and the 8-byte offset, in two ``array`` columns), filled to at most
``log.cleaner.io.buffer.load.factor`` (0.9) of its slots. A cleaning pass maps the dirty
section's keys to their latest offsets and then keeps a record only if it is that offset (see
:mod:`log.cleaner`). Memory is fixed when the map is made: a pass that fills it stops at a
batch boundary and the next pass continues from there.

Invariants: ``len(self) <= max_entries = int(slots * load_factor)``; a slot is empty iff its
digest is 0 (digests are forced non-zero); linear probing, no deletions. Two keys with the
same 64-bit digest are one key to the map (Kafka accepts the same risk with its digests).
"""

from __future__ import annotations

import hashlib
from array import array

LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor


class OffsetMap:
    """Key digest -> latest offset, in a fixed amount of memory (Kafka's SkimpyOffsetMap).

    Invariants: ``len(self) <= max_entries = int(slots * load_factor)``; a slot is empty iff
    its digest is 0 (digests are forced non-zero); linear probing, no deletions.
    """

    SLOT_BYTES = 16

    def __init__(self, memory_bytes: int, load_factor: float = LOAD_FACTOR) -> None:
        self.slots = max(16, memory_bytes // self.SLOT_BYTES)
        self._digests = array("Q", bytes(8 * self.slots))
        self._offsets = array("q", bytes(8 * self.slots))
        self.max_entries = max(1, int(self.slots * load_factor))
        self.entries = 0

    @property
    def memory_bytes(self) -> int:
        return self.slots * self.SLOT_BYTES

    def __len__(self) -> int:
        return self.entries

    @property
    def full(self) -> bool:
        return self.entries >= self.max_entries

    @staticmethod
    def digest(key: bytes) -> int:
        d = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")
        return d or 1

    def _slot(self, d: int) -> int:
        """The slot holding digest ``d``, or the empty slot where it would go (linear probing)."""
        digests, slots = self._digests, self.slots
        i = d % slots
        while True:
            cur = digests[i]
            if cur == d or cur == 0:
                return i
            i += 1
            if i == slots:
                i = 0

    def put(self, key: bytes, offset: int) -> None:
        d = self.digest(key)
        i = self._slot(d)
        if self._digests[i] == 0:
            if self.entries >= self.max_entries:
                raise OverflowError("offset map is full")
            self._digests[i] = d
            self.entries += 1
        self._offsets[i] = offset

    def get(self, key: bytes) -> int:
        """The latest offset mapped for ``key``, or -1."""
        i = self._slot(self.digest(key))
        return self._offsets[i] if self._digests[i] else -1
