"""Dynamic group configs (KIP-848, KIP-932): a GROUP config resource (type 32) as Kafka 4.x
has it -- Kafka's ``GroupConfig`` (names, types, validation) and ``GroupConfigManager`` (the
groups' overrides, consulted by the coordinators).

Theory of operation. IncrementalAlterConfigs/AlterConfigs on a GROUP resource hand the
group's complete new override set to :meth:`GroupConfigStore.replace`, which validates it
(:func:`validate_group_configs`), persists it and updates :attr:`GroupConfigStore.overrides`
in place. That dict is *shared*: the group coordinator's ``GroupConfig.group_overrides``
(session timeouts and heartbeat intervals of consumer and share groups) and the share
partition manager's ``ShareConfig.group_overrides`` (``share.auto.offset.reset``,
``share.record.lock.duration.ms``) are the same object, and read it at each use, so a change
applies to the next heartbeat, timer, acquisition or share-partition creation.

Persistence follows the other dynamic configs: a single broker keeps
``<log.dirs[0]>/samsa-group-configs.json``; in a cluster the configs live in ZooKeeper at
``/config/groups/<url-encoded group>`` (the ``/config/<type>/<name>`` shape of topic, user and client
configs) with a ``/config/changes`` notification, on which every broker reloads that group.

Validation is Kafka's ``GroupConfig.validate``: unknown names are ``Unknown group config
name: X``; a value's type/range uses ConfigDef's messages; then each value against the
broker's bounds (``group.consumer.min/max.session.timeout.ms``,
``group.share.min/max.record.lock.duration.ms``, ...) with Kafka's messages, and the session
timeout must exceed the heartbeat interval. Every failure is INVALID_CONFIG.

A value not set on the group is the broker's property it overrides (its synonym), which
DescribeConfigs reports as STATIC_BROKER_CONFIG, else Kafka's default.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from protocol.errors import InvalidConfigError, KafkaError

from .cluster import zk_data as zd
from .cluster.support import MetadataSupport
from .config.definitions import ConfigDef, ConfigSource, ConfigType
from .config.properties import BrokerConfig
from .config.resolution import Resolved

if TYPE_CHECKING:  # a single broker imports no ZooKeeper client
    from .cluster.zk.client import KafkaZkClient

log = logging.getLogger("samsa.group_configs")

GROUPS_ENTITY = "groups"  # /config/groups/<group> (broker/cluster/zk_data.py's /config/<type>/<name>)

T = ConfigType
# Kafka's GroupConfig (4.0), each with the broker property whose value is its default.
GROUP_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in [
    ConfigDef("consumer.heartbeat.interval.ms", T.INT, "5000",
              "The heartbeat interval given to the members of a consumer group.", at_least=1,
              synonyms=(("group.consumer.heartbeat.interval.ms", 1),)),
    ConfigDef("consumer.session.timeout.ms", T.INT, "45000",
              "The timeout to detect client failures when using the consumer group protocol.", at_least=1,
              synonyms=(("group.consumer.session.timeout.ms", 1),)),
    ConfigDef("share.auto.offset.reset", T.STRING, "latest",
              "The strategy to initialize the share-partition start offset.", one_of=("latest", "earliest"),
              synonyms=(("share.auto.offset.reset", 1),)),
    ConfigDef("share.heartbeat.interval.ms", T.INT, "5000",
              "The heartbeat interval given to the members of a share group.", at_least=1,
              synonyms=(("group.share.heartbeat.interval.ms", 1),)),
    ConfigDef("share.record.lock.duration.ms", T.INT, "30000",
              "The record acquisition lock duration in milliseconds for share groups.", at_least=1000,
              synonyms=(("group.share.record.lock.duration.ms", 1),)),
    ConfigDef("share.session.timeout.ms", T.INT, "45000",
              "The timeout to detect client failures when using the share group protocol.", at_least=1,
              synonyms=(("group.share.session.timeout.ms", 1),)),
]}

# (group config, broker property of its lower bound, Kafka's default, of its upper bound, default)
_BOUNDS = (
    ("consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms", 5000,
     "group.consumer.max.heartbeat.interval.ms", 15000),
    ("consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms", 45000,
     "group.consumer.max.session.timeout.ms", 60000),
    ("share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms", 5000,
     "group.share.max.heartbeat.interval.ms", 15000),
    ("share.session.timeout.ms", "group.share.min.session.timeout.ms", 45000,
     "group.share.max.session.timeout.ms", 60000),
    ("share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms", 15000,
     "group.share.max.record.lock.duration.ms", 60000),
)


def _broker_value(broker_config: BrokerConfig, prop: str, default: str | None) -> str | None:
    raw = broker_config.get(prop) if broker_config is not None else None
    return default if raw is None else str(raw)


def resolve_group_config(broker_config: BrokerConfig, overrides: Mapping[str, str], name: str) -> Resolved:
    """A group config's value: the group's own, else the broker property, else Kafka's default."""
    d = GROUP_CONFIGS[name]
    chain: list[tuple[str, str | None, ConfigSource]] = []
    if name in overrides:
        chain.append((name, overrides[name], ConfigSource.DYNAMIC_GROUP_CONFIG))
    prop = d.synonyms[0][0]
    raw = broker_config.get(prop) if broker_config is not None else None
    if raw is not None:
        chain.append((prop, str(raw), ConfigSource.STATIC_BROKER_CONFIG))
    chain.append((prop, d.default, ConfigSource.DEFAULT_CONFIG))
    return Resolved(name, chain[0][1], chain[0][2], tuple(chain))


def validate_group_configs(configs: Mapping[str, str | None], broker_config: BrokerConfig) -> dict[str, str]:
    """A group's whole override set, normalised; InvalidConfigError with Kafka's message."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise InvalidConfigError(message=f"Unknown group config name: {name}")
    out = {name: GROUP_CONFIGS[name].parse(value) for name, value in configs.items()}
    effective = {name: out.get(name) or _broker_value(broker_config, d.synonyms[0][0], d.default)
                 for name, d in GROUP_CONFIGS.items()}
    for name, lo_prop, lo_default, hi_prop, hi_default in _BOUNDS:
        value = int(effective[name] or 0)
        if value < int(_broker_value(broker_config, lo_prop, str(lo_default)) or lo_default):
            raise InvalidConfigError(message=f"{name} must be greater than or equal to {lo_prop}")
        if value > int(_broker_value(broker_config, hi_prop, str(hi_default)) or hi_default):
            raise InvalidConfigError(message=f"{name} must be less than or equal to {hi_prop}")
    for kind in ("consumer", "share"):
        if int(effective[f"{kind}.session.timeout.ms"] or 0) <= int(effective[f"{kind}.heartbeat.interval.ms"] or 0):
            raise InvalidConfigError(message=f"{kind}.session.timeout.ms must be greater than "
                                             f"{kind}.heartbeat.interval.ms")
    return out


class GroupConfigStore:
    """The dynamic configs of every group that has some: persisted, shared with the coordinators.

    Invariant: :attr:`overrides` holds only groups with at least one config, each already
    validated; it is mutated in place (never rebound), since the coordinators hold it.
    """

    FILE = "samsa-group-configs.json"

    def __init__(self, path: Path | None, zk: KafkaZkClient | None = None) -> None:
        self.path = path
        self.zk = zk
        self.overrides: dict[str, dict[str, str]] = {}
        self._reloads: set[asyncio.Task[None]] = set()

    @classmethod
    def load(cls, log_dir: Path, support: MetadataSupport) -> GroupConfigStore:
        """The broker's store, loaded: from ZooKeeper in a cluster (and kept current by its
        config-change notices), else from a file in the first log dir."""
        zk = support.zookeeper
        if zk is not None:
            store = cls(None, zk)
            for node in zk.children(zd.CONFIG_GROUPS):  # at start-up, before any client is served
                store._apply(node, zk.get_entity_config(GROUPS_ENTITY, node))
            support.entity_config_listeners.append(store._changed)
        else:
            store = cls(log_dir / cls.FILE)
            store._load()
        return store

    def _load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        data = json.loads(self.path.read_text())
        for group, configs in data.get("groups", {}).items():
            if configs:
                self.overrides[group] = {str(k): str(v) for k, v in configs.items()}

    def _changed(self, kind: str, node: str) -> None:
        """A /config/changes notice (on the event loop): re-read the group's znode off the loop."""
        if kind != GROUPS_ENTITY:
            return
        task = asyncio.get_running_loop().create_task(self._reload(node))
        self._reloads.add(task)
        task.add_done_callback(self._reloads.discard)

    async def _reload(self, node: str) -> None:
        assert self.zk is not None
        try:
            configs = await self.zk.call(self.zk.get_entity_config, GROUPS_ENTITY, node)
        except KafkaError as e:
            log.warning("Could not re-read the dynamic configs of group %s: %s", unquote(node), e.message)
            return
        self._apply(node, configs)

    def _apply(self, node: str, configs: dict[str, str]) -> None:
        group = unquote(node)
        if configs:
            self.overrides[group] = configs
        else:
            self.overrides.pop(group, None)

    def get(self, group: str) -> dict[str, str]:
        return dict(self.overrides.get(group, {}))

    def groups(self) -> list[str]:
        return sorted(self.overrides)

    async def replace(self, group: str, configs: Mapping[str, str]) -> None:
        """Store ``configs`` (already validated) as the group's complete override set; in a
        cluster written to ZooKeeper off the event loop (REQUEST_TIMED_OUT when it does not answer)."""
        zk = self.zk
        if zk is not None:
            # The znode name is URL-encoded, as Kafka's Sanitizer does for user and client ids,
            # so a group id with "/" stays one znode.
            node, new = quote(group, safe=""), dict(configs)
            await zk.call(lambda: zk.set_entity_config(GROUPS_ENTITY, node, new, notify=True))
        if configs:
            self.overrides[group] = dict(configs)
        else:
            self.overrides.pop(group, None)
        if self.path is not None:
            tmp = self.path.with_suffix(".tmp")
            with open(tmp, "w") as f:
                json.dump({"version": 1, "groups": self.overrides}, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        log.info("Dynamic configs of group %s now %s", group, dict(configs))
