"""IncrementalAlterConfigs (key 44), versions 0-1: change individual configs (KIP-339).

Each config carries an operation: SET (0) a value, DELETE (1) the override (back to the
inherited value), APPEND (2) or SUBTRACT (3) items of a LIST config (``cleanup.policy``,
the throttled-replica lists); APPEND/SUBTRACT on a non-list config is INVALID_CONFIG, as in
Kafka. The operations are applied to the resource's current overrides, the result is
validated as a whole, and only then stored (SUBTRACT of the last ``cleanup.policy`` leaves an
empty list, which Kafka accepts: neither deleted nor compacted, the log is kept): the topic registry persists topic overrides and rebuilds the partitions' LogConfig
live; BROKER resources (this broker's id, or "" for the cluster default) go to the dynamic
broker configs; GROUP resources (Kafka 4.x: ``consumer.session.timeout.ms``,
``share.auto.offset.reset``, ...) to the group's dynamic configs (``broker/group_configs.py``),
checked against the broker's ``group.*.min/max.*`` bounds. A key named twice in one resource is INVALID_REQUEST. ``validate_only``
stops after validation. v1 is flexible.
"""

from __future__ import annotations

from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..config.definitions import TOPIC_CONFIGS, ConfigDef, ConfigType, broker_config_def
from ..config.resolution import resolve_topic_config
from ..group_configs import GROUP_CONFIGS
from ..security.acl import (
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_DENIED,
    GROUP,
    GROUP_DENIED,
    TOPIC,
    TOPIC_DENIED,
    Requires,
)
from . import RequestContext, api
from .alter_configs import (
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    apply_resource,
    config_resource_authorized,
    current_overrides,
)

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


def _def(resource_type: int, name: str) -> ConfigDef:
    d = TOPIC_CONFIGS.get(name) if resource_type == RESOURCE_TOPIC else \
        GROUP_CONFIGS.get(name) if resource_type == RESOURCE_GROUP else broker_config_def(name)
    if d is None:
        kind = "topic" if resource_type == RESOURCE_TOPIC else "group" if resource_type == RESOURCE_GROUP \
            else "broker"
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown {kind} config name: {name}")
    return d


@api(ApiKey.INCREMENTAL_ALTER_CONFIGS, versions=(0, 1), authz=(
    Requires(ALTER_CONFIGS, TOPIC, TOPIC_DENIED, "each TOPIC resource"),
    Requires(ALTER_CONFIGS, GROUP, GROUP_DENIED, "each GROUP resource"),
    Requires(ALTER_CONFIGS, CLUSTER, CLUSTER_DENIED, "each BROKER / BROKER_LOGGER resource")))
async def handle_incremental_alter_configs(ctx: RequestContext, req: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    R = ctx.response_class
    Resp = R.AlterConfigsResourceResponse
    out = []
    for res in req.resources:
        code, message = ErrorCode.NONE, None
        try:
            config_resource_authorized(ctx, ALTER_CONFIGS, res.resource_type, res.resource_name)
            current = current_overrides(ctx, res.resource_type, res.resource_name)
            seen: set[str] = set()
            for c in res.configs:
                if c.name in seen:
                    raise KafkaError(ErrorCode.INVALID_REQUEST,
                                     f"Error due to duplicate config keys : {c.name}")
                seen.add(c.name)
                op = c.config_operation
                if op == OP_SET:
                    if c.value is None:
                        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {c.name}")
                    current[c.name] = c.value
                elif op == OP_DELETE:
                    _def(res.resource_type, c.name)
                    current.pop(c.name, None)
                elif op in (OP_APPEND, OP_SUBTRACT):
                    d = _def(res.resource_type, c.name)
                    if d.type is not ConfigType.LIST:
                        verb = "append" if op == OP_APPEND else "subtract"
                        raise KafkaError(ErrorCode.INVALID_CONFIG,
                                         f"Config value {verb} is not allowed for config key: {c.name}")
                    if res.resource_type == RESOURCE_TOPIC:
                        base = current.get(c.name)
                        if base is None:
                            info = ctx.broker.topics.get(res.resource_name)
                            base = resolve_topic_config(ctx.broker.config, info.configs if info else {},
                                                             c.name).value
                    else:
                        base = current.get(c.name, d.default)
                    items = [x for x in (base or "").split(",") if x]
                    change = [x.strip() for x in (c.value or "").split(",") if x.strip()]
                    if op == OP_APPEND:
                        items += [x for x in change if x not in items]
                    else:
                        items = [x for x in items if x not in change]
                    current[c.name] = ",".join(items)
                else:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op} for {c.name}")
            await apply_resource(ctx, res.resource_type, res.resource_name, current, bool(req.validate_only))
        except KafkaError as e:
            code, message = e.code, e.message
        out.append(Resp(error_code=int(code), error_message=message, resource_type=res.resource_type,
                        resource_name=res.resource_name))
    return R(throttle_time_ms=0, responses=out)
