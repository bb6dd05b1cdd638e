"""The broker properties the group coordinator reads, with Kafka's names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .consumer.assignors import ASSIGNORS
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
    # KIP-848 consumer groups (Kafka 4.x names and defaults).
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_min_heartbeat_interval_ms: int = 5000
    group_consumer_max_heartbeat_interval_ms: int = 15000
    group_consumer_session_timeout_ms: int = 45000
    group_consumer_min_session_timeout_ms: int = 45000
    group_consumer_max_session_timeout_ms: int = 60000
    group_consumer_max_size: int = 2**31 - 1
    # The first is the default for members that name none (group.remote.assignor).
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    group_consumer_migration_policy: str = "bidirectional"
    # KIP-932 share groups (Kafka 4.1 names and defaults).
    group_share_heartbeat_interval_ms: int = 5000
    group_share_min_heartbeat_interval_ms: int = 5000
    group_share_max_heartbeat_interval_ms: int = 15000
    group_share_session_timeout_ms: int = 45000
    group_share_min_session_timeout_ms: int = 45000
    group_share_max_session_timeout_ms: int = 60000
    group_share_max_size: int = 200
    # Dynamic group configs (Kafka's GroupConfigManager): group id -> {name: value}, e.g.
    # {"consumer.session.timeout.ms": "50000"}. The broker's store (broker/group_configs.py)
    # owns and mutates this very dict; the coordinator only reads it, at each use, so a
    # change applies to the next heartbeat or timer.
    group_overrides: dict[str, dict[str, str]] = field(default_factory=dict)

    _PROPERTIES = {
        "offsets.topic.num.partitions": "offsets_topic_num_partitions",
        "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
        "group.min.session.timeout.ms": "group_min_session_timeout_ms",
        "group.max.session.timeout.ms": "group_max_session_timeout_ms",
        "group.max.size": "group_max_size",
        "offsets.retention.minutes": "offsets_retention_minutes",
        "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
        "offset.metadata.max.bytes": "offset_metadata_max_bytes",
        "group.consumer.heartbeat.interval.ms": "group_consumer_heartbeat_interval_ms",
        "group.consumer.min.heartbeat.interval.ms": "group_consumer_min_heartbeat_interval_ms",
        "group.consumer.max.heartbeat.interval.ms": "group_consumer_max_heartbeat_interval_ms",
        "group.consumer.session.timeout.ms": "group_consumer_session_timeout_ms",
        "group.consumer.min.session.timeout.ms": "group_consumer_min_session_timeout_ms",
        "group.consumer.max.session.timeout.ms": "group_consumer_max_session_timeout_ms",
        "group.consumer.max.size": "group_consumer_max_size",
        "group.consumer.assignors": "group_consumer_assignors",
        "group.consumer.migration.policy": "group_consumer_migration_policy",
        "group.share.heartbeat.interval.ms": "group_share_heartbeat_interval_ms",
        "group.share.min.heartbeat.interval.ms": "group_share_min_heartbeat_interval_ms",
        "group.share.max.heartbeat.interval.ms": "group_share_max_heartbeat_interval_ms",
        "group.share.session.timeout.ms": "group_share_session_timeout_ms",
        "group.share.min.session.timeout.ms": "group_share_min_session_timeout_ms",
        "group.share.max.session.timeout.ms": "group_share_max_session_timeout_ms",
        "group.share.max.size": "group_share_max_size",
    }
    # Kafka's class names for the assignors name the same ones.
    _ASSIGNOR_CLASSES = {
        "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
        "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
    }
    MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> GroupConfig:
        cfg = cls()
        for prop, attr in cls._PROPERTIES.items():
            raw = props.get(prop)
            if raw is None:
                continue
            if attr == "group_consumer_assignors":
                names = [s.strip() for s in str(raw).split(",") if s.strip()]
                setattr(cfg, attr, tuple(cls._ASSIGNOR_CLASSES.get(n, n) for n in names))
            elif attr == "group_consumer_migration_policy":
                setattr(cfg, attr, str(raw).strip().lower())
            else:
                setattr(cfg, attr, int(raw) if isinstance(raw, (int, float)) else int(str(raw)))
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """The consistency checks Kafka's ``GroupCoordinatorConfig`` makes; ValueError names the
        offending property."""
        def between(name: str, value: int, lo_name: str, lo: int, hi_name: str, hi: int) -> None:
            if value < lo:
                raise ValueError(f"{name} ({value}) must be greater than or equal to {lo_name} ({lo})")
            if value > hi:
                raise ValueError(f"{name} ({value}) must be less than or equal to {hi_name} ({hi})")

        between("group.consumer.heartbeat.interval.ms", self.group_consumer_heartbeat_interval_ms,
                "group.consumer.min.heartbeat.interval.ms",
                self.group_consumer_min_heartbeat_interval_ms,
                "group.consumer.max.heartbeat.interval.ms",
                self.group_consumer_max_heartbeat_interval_ms)
        between("group.consumer.session.timeout.ms", self.group_consumer_session_timeout_ms,
                "group.consumer.min.session.timeout.ms", self.group_consumer_min_session_timeout_ms,
                "group.consumer.max.session.timeout.ms", self.group_consumer_max_session_timeout_ms)
        between("group.share.heartbeat.interval.ms", self.group_share_heartbeat_interval_ms,
                "group.share.min.heartbeat.interval.ms", self.group_share_min_heartbeat_interval_ms,
                "group.share.max.heartbeat.interval.ms", self.group_share_max_heartbeat_interval_ms)
        between("group.share.session.timeout.ms", self.group_share_session_timeout_ms,
                "group.share.min.session.timeout.ms", self.group_share_min_session_timeout_ms,
                "group.share.max.session.timeout.ms", self.group_share_max_session_timeout_ms)
        if self.group_share_heartbeat_interval_ms >= self.group_share_session_timeout_ms:
            raise ValueError("group.share.heartbeat.interval.ms must be less than "
                             "group.share.session.timeout.ms")
        if self.group_consumer_heartbeat_interval_ms >= self.group_consumer_session_timeout_ms:
            raise ValueError("group.consumer.heartbeat.interval.ms must be less than "
                             "group.consumer.session.timeout.ms")
        unknown = [a for a in self.group_consumer_assignors if a not in ASSIGNORS]
        if unknown or not self.group_consumer_assignors:
            raise ValueError(f"group.consumer.assignors: unknown assignor(s) {unknown}; "
                             f"supported: {', '.join(ASSIGNORS)}")
        if self.group_consumer_migration_policy not in self.MIGRATION_POLICIES:
            raise ValueError(f"Invalid value {self.group_consumer_migration_policy} for "
                             f"configuration group.consumer.migration.policy: String must be "
                             f"one of: {', '.join(self.MIGRATION_POLICIES).upper()}")

    @classmethod
    def property_names(cls) -> list[str]:
        return list(cls._PROPERTIES)

    # --- a group's own values (dynamic group configs override the broker's) -------------------
    def _for_group(self, group_id: str, name: str, default: int) -> int:
        raw = self.group_overrides.get(group_id, {}).get(name)
        return default if raw is None else int(raw)

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        return self._for_group(group_id, "consumer.session.timeout.ms", self.group_consumer_session_timeout_ms)

    def consumer_heartbeat_interval_ms(self, group_id: str) -> int:
        return self._for_group(group_id, "consumer.heartbeat.interval.ms",
                               self.group_consumer_heartbeat_interval_ms)

    def share_session_timeout_ms(self, group_id: str) -> int:
        return self._for_group(group_id, "share.session.timeout.ms", self.group_share_session_timeout_ms)

    def share_heartbeat_interval_ms(self, group_id: str) -> int:
        return self._for_group(group_id, "share.heartbeat.interval.ms", self.group_share_heartbeat_interval_ms)

