"""Assertion helpers that speak the Kafka protocol (through kafka-python), so they work the same
against the embedded broker and against an external Kafka (``--samsa-bootstrap``)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic, UserScramCredentialUpsertion
from kafka.consumer.fetcher import ConsumerRecord

# DescribeGroups' answer for one group as kafka-python gives it ("group_state", "members", ...)
GroupDescription = dict[str, object]


class Admin:
    """A kafka-python admin client (and, for reading records, a consumer) on one bootstrap address."""

    def __init__(self, bootstrap_servers: str, **client_config: object) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.client_config = client_config
        self.client = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="samsa-testing",
                                       **client_config)

    def close(self) -> None:
        self.client.close()

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     configs: Mapping[str, object] | None = None) -> None:
        topic = NewTopic(name, partitions, replication_factor,
                         topic_configs={k: str(v) for k, v in (configs or {}).items()})
        self.client.create_topics([topic], timeout_ms=30000)

    def delete_topic(self, name: str) -> None:
        self.client.delete_topics([name], timeout_ms=30000)

    def add_scram_user(self, user: str, password: str) -> None:
        errors = self.client.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(user, m, password) for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")])
        bad = {u: e for u, e in (errors or {}).items() if e}
        if bad:
            raise RuntimeError(f"cannot create SCRAM credentials: {bad}")

    def leader(self, topic: str, partition: int = 0) -> int:
        """The id of the partition's leader in a Metadata answer now (-1: none or unknown)."""
        for t in self.client.describe_topics([topic]):
            for p in t.get("partitions") or []:
                if p.get("partition_index") == partition:
                    return int(p.get("leader_id", -1))
        return -1

    def records(self, topic: str, partition: int | None = None, timeout: float = 10.0) -> list[ConsumerRecord]:
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap_servers, enable_auto_commit=False,
                                 client_id="samsa-testing-records", **self.client_config)
        try:
            parts = [partition] if partition is not None else sorted(consumer.partitions_for_topic(topic) or [])
            tps = [TopicPartition(topic, p) for p in parts]
            if not tps:
                return []
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            ends = consumer.end_offsets(tps)
            out: dict[TopicPartition, list[ConsumerRecord]] = {tp: [] for tp in tps}
            deadline = time.monotonic() + timeout
            while any(consumer.position(tp) < ends[tp] for tp in tps):
                if time.monotonic() > deadline:
                    got = {f"{tp.topic}-{tp.partition}": consumer.position(tp) for tp in tps}
                    raise TimeoutError(f"read up to {got} of end offsets {ends} in {timeout} s")
                for tp, recs in consumer.poll(timeout_ms=200).items():
                    out[tp].extend(r for r in recs if r.offset < ends[tp])
            return [r for tp in tps for r in out[tp]]
        finally:
            consumer.close()

    def committed_offsets(self, group: str) -> dict[TopicPartition, int]:
        result = self.client.list_group_offsets({group: None}).get(group, {})
        return {tp: om.offset for tp, om in result.items() if om.offset >= 0}

    def describe_group(self, group: str) -> GroupDescription:
        return dict(self.client.describe_groups([group])[group])

    def wait_group_stable(self, group: str, timeout: float = 30.0, members: int | None = None) -> GroupDescription:
        deadline = time.monotonic() + timeout
        while True:
            desc = self.describe_group(group)
            state = desc.get("group_state") or desc.get("state")
            listed = desc.get("members")
            count = len(listed) if isinstance(listed, list) else 0
            if state == "Stable" and (members is None or count == members):
                return desc
            if time.monotonic() > deadline:
                raise TimeoutError(f"group {group!r} not Stable{'' if members is None else f' with {members} members'}"
                                   f" after {timeout} s: state {state!r}, {count} members")
            time.sleep(0.05)


class KafkaHelpers:
    """The helpers a test asserts with, over the Kafka protocol through one :class:`Admin`: shared by
    :class:`~broker.testing.SamsaBroker` and the plugin's external Kafka (``--samsa-bootstrap``)."""

    _admin: Admin | None = None

    @property
    def bootstrap_servers(self) -> str:
        raise NotImplementedError

    @property
    def admin(self) -> Admin:
        """kafka-python's admin client (and consumers) bound to this broker (created on first use)."""
        if self._admin is None:
            self._admin = Admin(self.bootstrap_servers)
        return self._admin

    def _close_admin(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def create_topic(self, name: str | None = None, partitions: int = 1, replication_factor: int = 1,
                     configs: Mapping[str, object] | None = None) -> str:
        """Create a topic (a fresh unique name if none is given) and return its name."""
        name = name or f"test-{uuid.uuid4().hex[:12]}"
        self.admin.create_topic(name, partitions, replication_factor, configs or {})
        return name

    def delete_topic(self, name: str) -> None:
        self.admin.delete_topic(name)

    def records(self, topic: str, partition: int | None = None, timeout: float = 10.0) -> list[ConsumerRecord]:
        """Every record of a topic (or one partition) from its start to its end offset now,
        as kafka-python ConsumerRecords (partition by partition, in offset order)."""
        return self.admin.records(topic, partition, timeout)

    def committed_offsets(self, group: str) -> dict[TopicPartition, int]:
        """{TopicPartition: offset} the group has committed."""
        return self.admin.committed_offsets(group)

    def wait_group_stable(self, group: str, timeout: float = 30.0, members: int | None = None) -> GroupDescription:
        """Wait until the group is Stable (with ``members`` members if given); return its description."""
        return self.admin.wait_group_stable(group, timeout, members)
