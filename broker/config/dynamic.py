"""Dynamic broker configs (KIP-226): the per-broker and cluster-default layers, persisted and applied.

IncrementalAlterConfigs/AlterConfigs on a BROKER resource (name "0", or "" for the cluster
default) change them. They are persisted in ``<log.dirs[0]>/samsa-dynamic-configs.json``
(password configs encrypted by :mod:`.password_encoder`) and pushed into the running
:class:`~.properties.BrokerConfig` (its ``props`` and typed values), after which every topic's
LogConfig is rebuilt, so a new ``log.retention.ms`` default applies to topics without an
override at once, as in Kafka.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from protocol.errors import ErrorCode, KafkaError

from .definitions import is_sensitive
from .password_encoder import NO_SECRET, OLD_SECRET, PasswordEncoder, PasswordEncoderError, is_password_config
from .properties import BrokerConfig

log = logging.getLogger("samsa.configs")


class _Topics(Protocol):
    def names(self) -> list[str]: ...


class _TopicConfigs(Protocol):
    def apply_topic_config(self, topic: str) -> None: ...


class ConfiguredBroker(Protocol):
    """What the dynamic configs need of the broker: its config, its topics, and the replica manager
    that rebuilds a topic's LogConfig (server.py's Broker; a Protocol, as this package sits below it)."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def topics(self) -> _Topics: ...

    @property
    def replica_manager(self) -> _TopicConfigs: ...

class DynamicBrokerConfigs:
    """Per-broker and cluster-default dynamic configs of one broker: persisted, then applied.

    Invariant: ``BrokerConfig.props`` equals ``static_props`` overlaid with ``cluster_default``
    and then ``per_broker`` (broker's own wins), so every reader of the broker config sees the
    dynamic value without knowing about this class.
    """

    FILE = "samsa-dynamic-configs.json"

    def __init__(self, broker_config: BrokerConfig, path: Path) -> None:
        self.config = broker_config
        self.path = path
        self.static_props = dict(broker_config.props)
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}

    @classmethod
    def attach(cls, broker: ConfiguredBroker) -> DynamicBrokerConfigs:
        """The broker's instance, created (and the persisted file applied) on first use."""
        existing = broker.config.dynamic
        if isinstance(existing, DynamicBrokerConfigs):
            return existing
        dyn = cls(broker.config, broker.config.log_dirs[0] / cls.FILE)
        dyn.load()
        broker.config.dynamic = dyn
        if dyn.per_broker or dyn.cluster_default:
            dyn.apply(broker)
        return dyn

    def load(self) -> None:
        """Read the file; password configs are decoded (:mod:`.password_encoder`)."""
        if not self.path.exists():
            return
        data = json.loads(self.path.read_text())
        self.per_broker = self._decoded({k: str(v) for k, v in data.get("broker", {}).items()})
        self.cluster_default = {k: str(v) for k, v in data.get("default", {}).items()}

    def _decoded(self, stored: dict[str, str]) -> dict[str, str]:
        """Kafka's DynamicBrokerConfig: decode with password.encoder.secret, else with
        password.encoder.old.secret (and store again under the new secret); a value neither
        decodes is dropped with an error (the static config, if any, applies)."""
        out, reencode = {}, False
        encoders = [PasswordEncoder.from_config(self.config), PasswordEncoder.from_config(self.config, OLD_SECRET)]
        for k, v in stored.items():
            if not is_password_config(k):
                out[k] = v
                continue
            for i, enc in enumerate(encoders):
                if enc is None:
                    continue
                try:
                    out[k] = enc.decode(v)
                    reencode |= i == 1
                    break
                except PasswordEncoderError:
                    continue
            else:
                log.error("Dynamic password config %s of %s could not be decoded with password.encoder.secret "
                          "(or password.encoder.old.secret); ignoring it", k, self.path)
        if reencode and encoders[0] is not None:
            self.per_broker = out
            self._persist()
            log.info("Dynamic password configs re-encoded with the new password.encoder.secret")
        return out

    def _persist(self) -> None:
        stored = dict(self.per_broker)
        if any(is_password_config(k) for k in stored):
            enc = PasswordEncoder.from_config(self.config)
            if enc is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST, NO_SECRET)
            stored = {k: enc.encode(v) if is_password_config(k) else v for k, v in stored.items()}
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump({"version": 1, "broker": stored, "default": self.cluster_default}, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def replace(self, default_entity: bool, configs: Mapping[str, str]) -> None:
        if default_entity:
            self.cluster_default = dict(configs)
        else:
            self.per_broker = dict(configs)
        self._persist()

    def apply(self, broker: ConfiguredBroker) -> None:
        """Push the layers into BrokerConfig and rebuild every topic's LogConfig."""
        self.config.replace_props({**self.static_props, **self.cluster_default, **self.per_broker})
        for name in broker.topics.names():
            try:
                broker.replica_manager.apply_topic_config(name)
            except Exception:
                log.exception("Could not apply new broker defaults to topic %s", name)
        log.info("Dynamic broker configs now %s (cluster default %s)", _masked(self.per_broker),
                 _masked(self.cluster_default))


def _masked(configs: Mapping[str, str]) -> dict[str, str]:
    return {k: "[hidden]" if is_sensitive(k) else v for k, v in configs.items()}
