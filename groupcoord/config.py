"""The broker properties the group coordinator reads, with Kafka's names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .records import DEFAULT_OFFSETS_TOPIC_PARTITIONS


@dataclass(slots=True)
class GroupConfig:
    """The broker properties the coordinator reads, with Kafka's defaults."""

    offsets_topic_num_partitions: int = DEFAULT_OFFSETS_TOPIC_PARTITIONS
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = 2**31 - 1
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs (KIP-394): how long a member that has
    # never completed a join may stay without heartbeating.
    new_member_join_timeout_ms: int = 300_000

    _PROPERTIES = {
        "offsets.topic.num.partitions": "offsets_topic_num_partitions",
        "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
        "group.min.session.timeout.ms": "group_min_session_timeout_ms",
        "group.max.session.timeout.ms": "group_max_session_timeout_ms",
        "group.max.size": "group_max_size",
        "offsets.retention.minutes": "offsets_retention_minutes",
        "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
        "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    }

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> GroupConfig:
        cfg = cls()
        for prop, attr in cls._PROPERTIES.items():
            if props.get(prop) is not None:
                setattr(cfg, attr, int(props[prop]))
        return cfg

    @classmethod
    def property_names(cls) -> list[str]:
        return list(cls._PROPERTIES)

