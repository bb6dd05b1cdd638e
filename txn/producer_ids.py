"""Producer id allocation that never hands out the same id twice, even across crashes.

Theory of operation: as Kafka's ``ProducerIdManager``, ids are reserved in blocks of 1000.
Before the first id of a block is returned, the block is made durable in
``<log.dir>/producer-id-block`` (the JSON shape of Kafka's ZooKeeper node
``/latest_producer_id_block``: ``{"version":1,"broker":0,"block_start":"0","block_end":"999"}``)
by writing a temporary file, fsyncing it, renaming it over the old one and fsyncing the
directory. After a restart the manager starts at the block after the persisted one, so ids of
a partly used block are skipped rather than reused: a gap is harmless, a repeat would let two
producers share sequence numbers.

One manager serves both idempotent producers (InitProducerId without a transactional id) and
the transaction coordinator. It is thread-safe, although the broker calls it from its event
loop only.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from protocol.errors import ErrorCode, KafkaError

PRODUCER_ID_BLOCK_SIZE = 1000
BLOCK_FILE = "producer-id-block"
MAX_PRODUCER_ID = (1 << 63) - 1


class ProducerIdManager:
    """Hands out producer ids from durable blocks: ``generate()`` (alias ``generate_producer_id()``).

    ``path`` is the block file (the broker passes ``<log.dir>/producer-id-block``); a directory
    is accepted too and gets ``producer-id-block`` inside it.
    """

    def __init__(self, path: str | os.PathLike[str], broker_id: int = 0,
                 block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        p = Path(path)
        self.path = p / BLOCK_FILE if p.is_dir() else p
        self.broker_id = broker_id
        self.block_size = block_size
        self._lock = threading.Lock()
        self._next = 0
        self._block_end = -1  # last id of the current block; nothing reserved yet
        self._persisted_end = self._read_persisted_end()
        self._next = self._persisted_end + 1
        self._block_end = self._persisted_end  # force a fresh block before the first id

    def _read_persisted_end(self) -> int:
        try:
            data = json.loads(self.path.read_text())
            return int(data["block_end"])
        except FileNotFoundError:
            return -1
        except (ValueError, KeyError, TypeError) as e:
            # A torn write cannot happen (rename is atomic); a corrupt file is operator damage.
            raise RuntimeError(f"{self.path} is corrupt: {e}") from e

    def _persist_block(self, start: int, end: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        body = json.dumps({"version": 1, "broker": self.broker_id, "block_start": str(start),
                           "block_end": str(end)})
        with open(tmp, "w") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        self._persisted_end = end

    def generate_producer_id(self) -> int:
        with self._lock:
            if self._next > self._block_end:
                start = self._persisted_end + 1
                end = start + self.block_size - 1
                if end > MAX_PRODUCER_ID:
                    raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "producer ids exhausted")
                self._persist_block(start, end)
                self._next, self._block_end = start, end
            pid = self._next
            self._next += 1
            return pid

    generate = generate_producer_id

    @property
    def current_block(self) -> tuple[int, int]:
        """``(next id, last id of the block)``, for tests and DescribeProducers debugging."""
        return self._next, self._block_end
