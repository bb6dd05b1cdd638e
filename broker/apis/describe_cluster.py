"""DescribeCluster (key 60), versions 0-2 (KIP-700).

The cluster id, the controller (this broker, which plays KRaft's controller role on a single
node) and the broker list. v1 (KIP-919) adds ``endpoint_type``: only brokers (1) are served;
asking for controllers gets UNSUPPORTED_ENDPOINT_TYPE as from a Kafka broker. v2 (KIP-1073) adds
``include_fenced_brokers`` and each broker's ``is_fenced``: fencing is KRaft's, so every listed
broker is live and unfenced, and the flag changes nothing.
"""

from __future__ import annotations

from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import CLUSTER, CLUSTER_NAME, NO_AUTHZ
from . import RequestContext, api
from .metadata import cluster_brokers


@api(ApiKey.DESCRIBE_CLUSTER, versions=(0, 2), authz=NO_AUTHZ)  # KIP-430 operations only
async def handle_describe_cluster(ctx: RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.broker
    R = ctx.response_class
    if ctx.version >= 1 and getattr(req, "endpoint_type", 1) != 1:
        return R(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                 error_message="The broker only serves broker endpoints", endpoint_type=req.endpoint_type,
                 cluster_id=broker.cluster_id, controller_id=-1, brokers=[], authorized_operations=None)
    brokers, controller_id = cluster_brokers(ctx)
    return R(throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1, cluster_id=broker.cluster_id,
             controller_id=controller_id,
             brokers=[R.DescribeClusterBroker(broker_id=b, host=h, port=p, rack=rack, is_fenced=False) for b, h, p, rack in brokers],
             authorized_operations=ctx.authorized_operations(CLUSTER, CLUSTER_NAME)
             if req.include_cluster_authorized_operations else None)
