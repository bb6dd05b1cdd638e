"""DescribeConfigs (key 32), versions 0-4: topic and broker configs with sources and synonyms.

For a TOPIC resource every topic config is listed (or the requested keys) with its value
resolved as Kafka does: the topic's override, else a broker synonym (dynamic per-broker,
dynamic cluster default, static), else Kafka's default; see ``broker/config/resolution.py``. For a
BROKER resource named by this broker's id every broker config is listed, read-only unless
it can be altered dynamically (KIP-226); the resource named "" is the cluster-wide dynamic
default and lists only what has been set there.

Version notes: v0 has ``is_default`` instead of a source; v1 (KIP-226) adds
``config_source`` and, when ``include_synonyms`` is set, the synonyms in precedence order;
v3 (KIP-569) adds ``config_type`` and, with ``include_documentation``, each config's
documentation; v4 is the first flexible version. Unknown topics answer
UNKNOWN_TOPIC_OR_PARTITION. A GROUP resource (Kafka 4.x, KIP-848/932) lists Kafka's group
configs (``broker/group_configs.py``): the group's own value as DYNAMIC_GROUP_CONFIG, else the
broker property it overrides, else the default; a group need not exist to have configs, as in
Kafka. Another broker's id or an unsupported resource type (broker loggers, client metrics)
answers INVALID_REQUEST, per resource, never failing the
whole request. Sensitive values (PASSWORD configs: ``sasl.jaas.config``, ``ssl.*.password`` ...) are
sent as null. Listener-prefixed dynamic configs are listed with the listener config's type and,
as synonyms, the prefixed name followed by the base config's chain.
"""

from __future__ import annotations

from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse
from kafka.protocol.data_container import DataContainer

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..config.definitions import (
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigSource,
    ConfigType,
    broker_config_def,
    broker_configs,
    is_sensitive,
)
from ..config.dynamic import DynamicBrokerConfigs
from ..config.resolution import Resolved, resolve_broker_config, resolve_topic_config
from ..group_configs import GROUP_CONFIGS, resolve_group_config
from ..security.acl import (
    CLUSTER,
    CLUSTER_DENIED,
    DESCRIBE_CONFIGS,
    GROUP,
    GROUP_DENIED,
    TOPIC,
    TOPIC_DENIED,
    Requires,
)
from ..services import BrokerServices
from . import RequestContext, api
from .alter_configs import config_resource_authorized

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32


@api(ApiKey.DESCRIBE_CONFIGS, versions=(0, 4), authz=(
    Requires(DESCRIBE_CONFIGS, TOPIC, TOPIC_DENIED, "each TOPIC resource"),
    Requires(DESCRIBE_CONFIGS, GROUP, GROUP_DENIED, "each GROUP resource"),
    Requires(DESCRIBE_CONFIGS, CLUSTER, CLUSTER_DENIED, "each BROKER / BROKER_LOGGER resource")))
async def handle_describe_configs(ctx: RequestContext, req: DescribeConfigsRequest) -> DescribeConfigsResponse:
    broker = ctx.broker
    DynamicBrokerConfigs.attach(broker)
    R = ctx.response_class
    Result = R.DescribeConfigsResult
    Entry = Result.DescribeConfigsResourceResult
    Synonym = Entry.DescribeConfigsSynonym
    v = ctx.version
    include_synonyms = v >= 1 and bool(getattr(req, "include_synonyms", False))
    include_docs = v >= 3 and bool(getattr(req, "include_documentation", False))
    results = []
    for res in req.resources:
        keys = None if res.configuration_keys is None else list(res.configuration_keys)
        entries: list[DataContainer] = []
        code, message = ErrorCode.NONE, None
        try:
            config_resource_authorized(ctx, DESCRIBE_CONFIGS, res.resource_type, res.resource_name)
        except KafkaError as e:
            results.append(Result(error_code=int(e.code), error_message=e.message, resource_type=res.resource_type,
                                  resource_name=res.resource_name, configs=[]))
            continue
        if res.resource_type == RESOURCE_TOPIC:
            info = broker.topics.get(res.resource_name)
            if info is None:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, \
                    f"Topic '{res.resource_name}' does not exist."
            else:
                for name, d in sorted(TOPIC_CONFIGS.items()):
                    if keys is not None and name not in keys:
                        continue
                    r = resolve_topic_config(broker.config, info.configs, name)
                    entries.append(_entry(Entry, Synonym, v, d, r, read_only=False,
                                          synonyms=include_synonyms, docs=include_docs))
        elif res.resource_type == RESOURCE_BROKER:
            default_entity = res.resource_name == ""
            if not default_entity and res.resource_name != str(broker.broker_id):
                code, message = ErrorCode.INVALID_REQUEST, \
                    f"Unexpected broker id, expected {broker.broker_id} but received {res.resource_name}"
            else:
                for name, d in sorted(broker_configs().items()):
                    if keys is not None and name not in keys:
                        continue
                    r = resolve_broker_config(broker.config, name, default_entity=default_entity)
                    if default_entity and r.source != ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG:
                        continue
                    entries.append(_entry(Entry, Synonym, v, d, r, read_only=not d.dynamic,
                                          synonyms=include_synonyms, docs=include_docs))
                entries.extend(_listener_overrides(broker, keys, default_entity, Entry, Synonym, v,
                                                   include_synonyms, include_docs))
        elif res.resource_type == RESOURCE_GROUP:
            if not res.resource_name:
                code, message = ErrorCode.INVALID_REQUEST, "Group name can't be empty."
            else:
                overrides = broker.group_configs.get(res.resource_name)
                for name, d in sorted(GROUP_CONFIGS.items()):
                    if keys is not None and name not in keys:
                        continue
                    r = resolve_group_config(broker.config, overrides, name)
                    entries.append(_entry(Entry, Synonym, v, d, r, read_only=False,
                                          synonyms=include_synonyms, docs=include_docs))
        else:
            code, message = ErrorCode.INVALID_REQUEST, \
                f"Resource type {res.resource_type} is not supported by DescribeConfigs on this broker"
        results.append(Result(error_code=int(code), error_message=message, resource_type=res.resource_type,
                              resource_name=res.resource_name, configs=entries))
    return R(throttle_time_ms=0, results=results)


def _listener_overrides(broker: BrokerServices, keys: list[str] | None, default_entity: bool, Entry: type[DataContainer], Synonym: type[DataContainer],
                        v: int, synonyms: bool, docs: bool) -> list[DataContainer]:
    """Dynamic configs set under a listener prefix (``listener.name.<listener>.<config>``): shown as
    set, typed as the listener config they override, passwords as sensitive with a null value
    (stored encrypted, broker/config/password_encoder.py). As in Kafka, the synonyms are the prefixed name, then
    the base config's own chain."""
    dyn = DynamicBrokerConfigs.attach(broker)
    layer = dyn.cluster_default if default_entity else {**dyn.cluster_default, **dyn.per_broker}
    out = []
    for name in sorted(set(layer) - set(broker_configs())):
        if keys is not None and name not in keys:
            continue
        src = ConfigSource.DYNAMIC_BROKER_CONFIG if name in dyn.per_broker and not default_entity \
            else ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        d = broker_config_def(name)
        if d is None:  # a keystore setting accepted before the listener table (broker/security/tls.py)
            sensitive = is_sensitive(name)
            d = ConfigDef(name, ConfigType.PASSWORD if sensitive else ConfigType.STRING, None,
                               f"Listener config {name}.", sensitive=sensitive)
        chain: tuple[tuple[str, str | None, ConfigSource], ...] = ((name, layer[name], src),)
        base = name.split(".", 3)[3] if name.startswith("listener.name.") else name
        if not default_entity and base in broker_configs():
            chain += resolve_broker_config(broker.config, base).synonyms
        r = Resolved(name, layer[name], src, chain)
        out.append(_entry(Entry, Synonym, v, d, r, read_only=False, synonyms=synonyms, docs=docs))
    return out


def _entry(Entry: type[DataContainer], Synonym: type[DataContainer], v: int, d: ConfigDef, r: Resolved, *, read_only: bool,
           synonyms: bool, docs: bool) -> DataContainer:
    value = None if d.sensitive else r.value
    fields: dict[str, object] = {"name": d.name, "value": value, "read_only": read_only,
                              "is_sensitive": d.sensitive}
    if v == 0:
        fields["is_default"] = r.source == ConfigSource.DEFAULT_CONFIG
    else:
        fields["config_source"] = int(r.source)
        fields["synonyms"] = [Synonym(name=n, value=None if d.sensitive else val, source=int(src))
                              for n, val, src in r.synonyms] if synonyms else []
    if v >= 3:
        fields["config_type"] = int(d.type)
        fields["documentation"] = d.doc if docs else None
    return Entry(**fields)
