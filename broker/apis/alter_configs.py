"""AlterConfigs (key 33), versions 0-2: replace a resource's whole set of dynamic configs.

The legacy, non-incremental API: the configs sent become the resource's complete override
set, and every config not named goes back to its default (which is why KIP-339 added
IncrementalAlterConfigs; the Java AdminClient still offers this one as ``alterConfigs``).
TOPIC resources update the topic's overrides in the topic registry, which persists them and
rebuilds each partition's LogConfig at once. GROUP resources (Kafka 4.x, KIP-848/932) replace
the group's dynamic configs (``broker/group_configs.py``), read by the coordinators at once. BROKER resources (this broker's id, or "" for
the cluster-wide default) replace the dynamic broker configs (KIP-226), persisted in
``samsa-dynamic-configs.json`` and applied to every topic without an override.

Every value is validated first (type, range, allowed strings; unknown names rejected), so a
bad request changes nothing and answers INVALID_CONFIG with Kafka's message.
``validate_only`` validates and stops. Errors are per resource. v2 is flexible.
"""

from __future__ import annotations

from kafka.protocol.admin import AlterConfigsRequest, AlterConfigsResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..config.definitions import check_thread_pools, check_update_mode, validate_broker_config
from ..config.dynamic import DynamicBrokerConfigs
from ..config.password_encoder import NO_SECRET, PasswordEncoder, is_password_config
from ..config.properties import BrokerConfig
from ..config.resolution import validate_topic_configs
from ..group_configs import validate_group_configs
from ..network.connection_quotas import ConnectionQuotas
from ..security.acl import (
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_DENIED,
    CLUSTER_NAME,
    GROUP,
    GROUP_DENIED,
    TOPIC,
    TOPIC_DENIED,
    AclOperation,
    Requires,
)
from ..services import BrokerServices
from . import RequestContext, api

RESOURCE_TOPIC = 2
RESOURCE_GROUP = 32


def config_resource_authorized(ctx: RequestContext, operation: AclOperation, resource_type: int, name: str) -> None:
    """Kafka's check for a config resource: the topic or group itself, or the cluster for brokers
    and loggers."""
    if ctx.broker.authorizer is None:
        return
    if resource_type == RESOURCE_TOPIC:
        if not ctx.authorize(operation, TOPIC, name):
            raise KafkaError(TOPIC_DENIED, "Topic authorization failed.")
    elif resource_type == RESOURCE_GROUP:
        if not ctx.authorize(operation, GROUP, name):
            raise KafkaError(GROUP_DENIED, "Group authorization failed.")
    elif not ctx.authorize(operation, CLUSTER, CLUSTER_NAME):
        raise KafkaError(CLUSTER_DENIED, "Cluster authorization failed.")
RESOURCE_BROKER = 4


async def apply_resource(ctx: RequestContext, resource_type: int, name: str, new: dict[str, str],
                   validate_only: bool) -> None:
    """Validate ``new`` as the complete override set of a resource and (unless validating) apply it."""
    broker = ctx.broker
    if resource_type == RESOURCE_TOPIC:
        info = broker.topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        checked = validate_topic_configs(new, broker.config)
        if not validate_only:
            await broker.metadata_support.set_topic_configs(name, checked)
    elif resource_type == RESOURCE_BROKER:
        default_entity = name == ""
        if not default_entity and name != str(broker.broker_id):
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Unexpected broker id, expected {broker.broker_id} but received {name}")
        checked = {k: validate_broker_config(k, v) for k, v in new.items()}
        check_password_configs(broker, checked, default_entity)
        check_update_mode(checked, default_entity)
        check_thread_pools(broker.config, checked)
        dyn = DynamicBrokerConfigs.attach(broker)
        if broker.security is not None:  # a new keystore/truststore must load before it is accepted
            broker.security.validate_reconfiguration({**broker.config.props, **checked})
        validate_connection_quotas({**broker.config.props, **checked})
        if not validate_only:
            dyn.replace(default_entity, checked)
            dyn.apply(broker)
            broker.connection_quotas.reconfigure(broker.config)  # max.connections* apply at once
            if broker.security is not None:
                broker.security.reconfigure()  # reload the TLS listeners whose certificates changed
    elif resource_type == RESOURCE_GROUP:
        checked = validate_group_configs(new, broker.config)
        if not validate_only:
            await broker.group_configs.replace(name, checked)
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"AlterConfigs is not supported for resource type {resource_type} on this broker")


def check_password_configs(broker: BrokerServices, configs: dict[str, str], default_entity: bool) -> None:
    """Kafka's DynamicBrokerConfig.toPersistentProps: password configs are stored encrypted with
    password.encoder.secret (broker/config/password_encoder.py), only per broker."""
    if not any(is_password_config(k) for k in configs):
        return
    if default_entity:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Password config can be defined only at broker level")
    try:
        encoder = PasswordEncoder.from_config(broker.config)
    except ValueError as e:
        raise KafkaError(ErrorCode.INVALID_REQUEST, str(e)) from None
    if encoder is None:
        raise KafkaError(ErrorCode.INVALID_REQUEST, NO_SECRET)


def validate_connection_quotas(props: dict[str, str]) -> None:
    """max.connections* must parse (overrides resolve) before they are stored."""
    ConnectionQuotas(BrokerConfig(dict(props)), [], None)


def current_overrides(ctx: RequestContext, resource_type: int, name: str) -> dict[str, str]:
    if resource_type == RESOURCE_TOPIC:
        info = ctx.broker.topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        return dict(info.configs)
    if resource_type == RESOURCE_BROKER:
        dyn = DynamicBrokerConfigs.attach(ctx.broker)
        return dict(dyn.cluster_default if name == "" else dyn.per_broker)
    if resource_type == RESOURCE_GROUP:
        if not name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name can't be empty.")
        return ctx.broker.group_configs.get(name)
    raise KafkaError(ErrorCode.INVALID_REQUEST,
                     f"AlterConfigs is not supported for resource type {resource_type} on this broker")


@api(ApiKey.ALTER_CONFIGS, versions=(0, 2), authz=(
    Requires(ALTER_CONFIGS, TOPIC, TOPIC_DENIED, "each TOPIC resource"),
    Requires(ALTER_CONFIGS, GROUP, GROUP_DENIED, "each GROUP resource"),
    Requires(ALTER_CONFIGS, CLUSTER, CLUSTER_DENIED, "each BROKER / BROKER_LOGGER resource")))
async def handle_alter_configs(ctx: RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse:
    R = ctx.response_class
    Resp = R.AlterConfigsResourceResponse
    out = []
    for res in req.resources:
        code, message = ErrorCode.NONE, None
        try:
            config_resource_authorized(ctx, ALTER_CONFIGS, res.resource_type, res.resource_name)
            if res.resource_type == RESOURCE_GROUP and not res.resource_name:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name can't be empty.")
            new: dict[str, str] = {}
            for c in res.configs:
                if c.value is None:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {c.name}")
                new[c.name] = c.value
            await apply_resource(ctx, res.resource_type, res.resource_name, new, bool(req.validate_only))
        except KafkaError as e:
            code, message = e.code, e.message
        out.append(Resp(error_code=int(code), error_message=message, resource_type=res.resource_type,
                        resource_name=res.resource_name))
    return R(throttle_time_ms=0, responses=out)
