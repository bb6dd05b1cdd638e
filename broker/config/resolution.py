"""Where a config's value comes from: Kafka's resolution through the layers, as DescribeConfigs shows it.

A *topic* config's value is resolved the way Kafka resolves it:

1. the topic's own override (``DYNAMIC_TOPIC_CONFIG``), kept in the topic registry;
2. else the first of its broker *synonyms* that is set, each looked up as a dynamic
   per-broker config (``DYNAMIC_BROKER_CONFIG``), then the dynamic cluster default
   (``DYNAMIC_DEFAULT_BROKER_CONFIG``), then ``server.properties``/``--override``
   (``STATIC_BROKER_CONFIG``). Synonyms are ordered by precedence and may carry a unit
   (:data:`.definitions.TOPIC_CONFIGS`);
3. else Kafka's default (``DEFAULT_CONFIG``).

DescribeConfigs reports that chain as the config's synonyms (v1+). A *broker* config's
value follows steps 2-3 for its own name. This module owns no sockets; handlers in
``broker/apis`` call it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from log.config import LogConfig

from .definitions import TOPIC_CONFIGS, ConfigSource, broker_configs, validate_topic_config
from .properties import BrokerConfig, DynamicLayers


@dataclass(frozen=True)
class Resolved:
    name: str
    value: str | None
    source: ConfigSource
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]


def _dyn(broker_config: BrokerConfig | None) -> DynamicLayers | None:
    return broker_config.dynamic if broker_config is not None else None


def _broker_chain(broker_config: BrokerConfig | None, name: str) -> list[tuple[str, str | None, ConfigSource]]:
    """(name, value, source) of every place ``name`` is set for this broker, by precedence."""
    out: list[tuple[str, str | None, ConfigSource]] = []
    if broker_config is None:
        return out
    dyn = _dyn(broker_config)
    if dyn is not None:
        if name in dyn.per_broker:
            out.append((name, dyn.per_broker[name], ConfigSource.DYNAMIC_BROKER_CONFIG))
        if name in dyn.cluster_default:
            out.append((name, dyn.cluster_default[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        static = dyn.static_props
    else:
        static = broker_config.props
    if name in static:
        out.append((name, str(static[name]), ConfigSource.STATIC_BROKER_CONFIG))
    return out


def resolve_topic_config(broker_config: BrokerConfig | None, overrides: Mapping[str, str], name: str) -> Resolved:
    d = TOPIC_CONFIGS[name]
    chain: list[tuple[str, str | None, ConfigSource]] = []
    if name in overrides:
        chain.append((name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
    value: str | None = None
    for syn, mult in d.synonyms:
        for sname, sval, src in _broker_chain(broker_config, syn):
            if sval is not None and mult != 1:
                try:
                    n = int(sval)
                    sval_conv = str(n * mult if n >= 0 else n)
                except ValueError:
                    sval_conv = sval
                chain.append((sname, sval, src))
                if value is None:
                    value = sval_conv
            else:
                chain.append((sname, sval, src))
                if value is None:
                    value = sval
    if d.synonyms:
        first = d.synonyms[-1][0] if d.name == "retention.ms" or d.name == "segment.ms" else d.synonyms[0][0]
        bdef = broker_configs().get(first)
        chain.append((first, bdef.default if bdef else d.default, ConfigSource.DEFAULT_CONFIG))
    if name in overrides:
        return Resolved(name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG, tuple(chain))
    if value is not None:
        src = next(s for n_, v, s in chain if s != ConfigSource.DYNAMIC_TOPIC_CONFIG)
        return Resolved(name, value, src, tuple(chain))
    return Resolved(name, d.default, ConfigSource.DEFAULT_CONFIG, tuple(chain))


def effective_topic_config(broker_config: BrokerConfig | None, overrides: Mapping[str, str]) -> dict[str, str]:
    """Every topic config's value for a topic with these overrides (what its LogConfig obeys)."""
    out: dict[str, str] = {}
    for name in TOPIC_CONFIGS:
        r = resolve_topic_config(broker_config, overrides, name)
        if r.value is not None:
            out[name] = r.value
    for name, value in overrides.items():  # names log/ knows that we do not (kept as given)
        out.setdefault(name, value)
    return out


def resolve_broker_config(broker_config: BrokerConfig, name: str, *, default_entity: bool = False) -> Resolved:
    d = broker_configs()[name]
    chain = _broker_chain(broker_config, name)
    if default_entity:  # the cluster-wide default resource shows only the dynamic default layer
        chain = [c for c in chain if c[2] == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
    if chain:
        return Resolved(name, chain[0][1], chain[0][2], tuple(chain + [(name, d.default, ConfigSource.DEFAULT_CONFIG)]))
    return Resolved(name, d.default, ConfigSource.DEFAULT_CONFIG, ((name, d.default, ConfigSource.DEFAULT_CONFIG),))


def validate_topic_configs(configs: Mapping[str, str | None], broker_config: BrokerConfig | None = None,
                           ) -> dict[str, str]:
    """A topic's whole override map; also checks cross-field rules and that the log accepts it."""
    out = {name: validate_topic_config(name, value) for name, value in configs.items()}
    base = effective_topic_config(broker_config, {}) if broker_config is not None else {}
    LogConfig.from_properties({**base, **out})
    return out
