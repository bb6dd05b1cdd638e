"""Assertion helpers that speak the Kafka protocol (through kafka-python), so they work the same
against the embedded broker and against an external Kafka (``--samsa-bootstrap``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any


class Admin:
    """A kafka-python admin client (and, for reading records, a consumer) on one bootstrap address."""

    def __init__(self, bootstrap_servers: str, **client_config: Any) -> None:
        from kafka import KafkaAdminClient  # noqa: PLC0415

        self.bootstrap_servers = bootstrap_servers
        self.client_config = client_config
        self.client = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="samsa-testing",
                                       **client_config)

    def close(self) -> None:
        self.client.close()

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     configs: Mapping[str, object] | None = None) -> None:
        from kafka.admin import NewTopic  # noqa: PLC0415

        topic = NewTopic(name, partitions, replication_factor,
                         topic_configs={k: str(v) for k, v in (configs or {}).items()})
        self.client.create_topics([topic], timeout_ms=30000)

    def delete_topic(self, name: str) -> None:
        self.client.delete_topics([name], timeout_ms=30000)

    def add_scram_user(self, user: str, password: str) -> None:
        from kafka.admin import UserScramCredentialUpsertion  # noqa: PLC0415

        errors = self.client.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(user, m, password) for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")])
        bad = {u: e for u, e in (errors or {}).items() if e}
        if bad:
            raise RuntimeError(f"cannot create SCRAM credentials: {bad}")

    def records(self, topic: str, partition: int | None = None, timeout: float = 10.0) -> list[Any]:
        from kafka import KafkaConsumer, TopicPartition  # noqa: PLC0415

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
            out: dict[Any, list[Any]] = {tp: [] for tp in tps}
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

    def committed_offsets(self, group: str) -> dict[Any, int]:
        result = self.client.list_group_offsets({group: None}).get(group, {})
        return {tp: om.offset for tp, om in result.items() if om.offset >= 0}

    def describe_group(self, group: str) -> dict[str, Any]:
        return dict(self.client.describe_groups([group])[group])

    def wait_group_stable(self, group: str, timeout: float = 30.0, members: int | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        desc: dict[str, Any] = {}
        while True:
            desc = self.describe_group(group)
            state = desc.get("group_state") or desc.get("state")
            if state == "Stable" and (members is None or len(desc.get("members") or []) == members):
                return desc
            if time.monotonic() > deadline:
                raise TimeoutError(f"group {group!r} not Stable{'' if members is None else f' with {members} members'}"
                                   f" after {timeout} s: state {state!r}, {len(desc.get('members') or [])} members")
            time.sleep(0.05)
