"""ListConfigResources (key 74), versions 0-1 (KIP-714 as ListClientMetricsResources; KIP-1142).

The resources that can carry configs, for ``kafka-configs.sh --list`` / ``Admin.listConfigResources``
(and ``Admin.listClientMetricsResources``, v0). Needs DESCRIBE_CONFIGS on the cluster (else
CLUSTER_AUTHORIZATION_FAILED for the request), as Kafka.

* v0 lists client-metrics resources only; v1 lists the requested ``resource_types`` (empty: all
  of them): TOPIC (2) every topic, BROKER (4) and BROKER_LOGGER (8) every live broker's id,
  GROUP (32) the groups this broker coordinates and every group with dynamic configs
  (``broker/group_configs.py``), CLIENT_METRICS (16) none -- Samsa has no
  client-metrics subscriptions (``broker/apis/telemetry.py``). Any other type is
  UNSUPPORTED_VERSION for the request, as Kafka answers it.
"""

from __future__ import annotations

from kafka.protocol.admin import ListConfigResourcesRequest, ListConfigResourcesResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import CLUSTER, CLUSTER_DENIED, CLUSTER_NAME, DESCRIBE_CONFIGS, Requires
from . import RequestContext, api
from .metadata import cluster_brokers

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)


def _names(ctx: RequestContext, resource_type: int) -> list[str]:
    broker = ctx.broker
    if resource_type == TOPIC:
        return broker.topics.names()
    if resource_type in (BROKER, BROKER_LOGGER):
        return [str(b) for b, _h, _p, _r in cluster_brokers(ctx)[0]]
    if resource_type == GROUP:
        names: set[str] = set(broker.group_configs.groups()) if broker.group_configs is not None else set()
        if broker.group_coordinator is not None:
            _code, groups = broker.group_coordinator.list_groups()
            names.update(g.group_id for g in groups)
        return sorted(names)
    return []  # CLIENT_METRICS: no subscriptions


@api(ApiKey.LIST_CONFIG_RESOURCES, versions=(0, 1),
     authz=(Requires(DESCRIBE_CONFIGS, CLUSTER, CLUSTER_DENIED, "the cluster"),))
async def handle_list_config_resources(ctx: RequestContext, req: ListConfigResourcesRequest) -> ListConfigResourcesResponse:
    R = ctx.response_class
    if not ctx.authorize(DESCRIBE_CONFIGS, CLUSTER, CLUSTER_NAME):
        return R(throttle_time_ms=0, error_code=int(CLUSTER_DENIED), config_resources=[])
    types = [CLIENT_METRICS] if ctx.version == 0 else (list(req.resource_types) or list(SUPPORTED))
    if any(t not in SUPPORTED for t in types):
        return R(throttle_time_ms=0, error_code=int(ErrorCode.UNSUPPORTED_VERSION), config_resources=[])
    return R(throttle_time_ms=0, error_code=0, config_resources=[
        R.ConfigResource(resource_name=name, resource_type=t) for t in dict.fromkeys(types) for name in _names(ctx, t)])
