"""The topic registry: which topics exist, their ids, partition counts and config overrides.

On a single broker this plays the part of KRaft's metadata log (or ZooKeeper's /brokers/topics
and /config/topics): it is the source of truth for topic existence, persisted atomically to
``<first log dir>/samsa-metadata.json`` on every change. Each partition directory also gets
Kafka's ``partition.metadata`` file (``version: 0`` / ``topic_id: <base64>``) so that a log
directory can be matched to its topic id as Kafka does.

Invariants: topic names are unique and valid (Kafka's legal characters, at most 249);
partition counts only grow; the topic id never changes for the life of a topic.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from protocol import kafka_uuid
from protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("samsa.metadata")

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def validate_topic_name(name: str | None) -> None:
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters")
    if not _LEGAL.match(name):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name {name!r} is illegal, it contains a character other than "
                         "ASCII alphanumerics, '.', '_' and '-'")


def topic_id_base64(topic_id: uuid.UUID) -> str:
    """Kafka's textual form of a Uuid: URL-safe base64 without padding."""
    return kafka_uuid.to_string(topic_id)


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    configs: dict[str, str] = field(default_factory=dict)  # overrides only

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def to_json(self) -> dict[str, object]:
        return {"topic_id": kafka_uuid.to_string(self.topic_id), "partitions": self.num_partitions, "configs": self.configs}


class TopicRegistry:
    """Owns topic metadata; every mutation is persisted before it is visible."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self.cluster_id = ""
        self.listeners: list[Callable[[str, str], None]] = []  # (event, topic) observers

    def load(self) -> None:
        if not self.path.exists():
            return
        data = json.loads(self.path.read_text())
        self.cluster_id = data.get("cluster_id", "")
        for name, t in data.get("topics", {}).items():
            info = TopicInfo(name, kafka_uuid.from_string(t["topic_id"]), int(t["partitions"]), dict(t.get("configs", {})))
            self._topics[name] = info
            self._by_id[info.topic_id] = info
        log.info("Loaded metadata for %d topics from %s", len(self._topics), self.path)

    def _persist(self) -> None:
        data = {"version": 1, "cluster_id": self.cluster_id,
                "topics": {n: t.to_json() for n, t in sorted(self._topics.items())}}
        tmp = self.path.with_suffix(".tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def names(self) -> list[str]:
        return sorted(self._topics)

    def __iter__(self) -> Iterator[TopicInfo]:
        return iter(list(self._topics.values()))

    def __contains__(self, name: object) -> bool:
        return name in self._topics

    def create(self, name: str, num_partitions: int, configs: dict[str, str] | None = None) -> TopicInfo:
        validate_topic_name(name)
        if name in self._topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if num_partitions <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        info = TopicInfo(name, uuid.uuid4(), num_partitions, dict(configs or {}))
        self._topics[name] = info
        self._by_id[info.topic_id] = info
        self._persist()
        log.info("Created topic %s with topic ID %s, %d partitions and configs %s",
                 name, topic_id_base64(info.topic_id), num_partitions, info.configs or "{}")
        self._notify("created", name)
        return info

    def delete(self, name: str) -> TopicInfo:
        info = self._topics.pop(name, None)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        self._by_id.pop(info.topic_id, None)
        self._persist()
        log.info("Deleted topic %s (topic ID %s)", name, topic_id_base64(info.topic_id))
        self._notify("deleted", name)
        return info

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        info = self._topics[name]
        info.configs = dict(configs)
        self._persist()
        self._notify("configs", name)

    def replication_factor(self, name: str) -> int:
        """Replicas per partition of ``name``: one on a single broker (this broker)."""
        return 1

    def add_partitions(self, name: str, new_total: int, assignment: dict[int, list[int]] | None = None) -> None:
        """Grow ``name`` to ``new_total`` partitions. ``assignment`` (new partition -> replicas, as
        validated by CreatePartitions) can only name this broker here, so it changes nothing."""
        info = self._topics[name]
        if new_total <= info.num_partitions:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {info.num_partitions} partitions, which is higher than or "
                             f"equal to the requested {new_total}.")
        old_total, info.num_partitions = info.num_partitions, new_total
        self._persist()
        log.info("Increased the partitions of topic %s from %d to %d", name, old_total, new_total)
        self._notify("partitions", name)

    def _notify(self, event: str, name: str) -> None:
        for fn in self.listeners:
            fn(event, name)
