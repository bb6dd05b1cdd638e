"""DescribeClientQuotas (key 48), versions 0-1 (KIP-546; v1 flexible).

Needs DESCRIBE_CONFIGS on the CLUSTER (CLUSTER_AUTHORIZATION_FAILED). Each filter component
names an entity type (``user``, ``client-id``, ``ip``) and a match: 0 an exact name, 1 the
default entity, 2 any entity of that type. An entity matches when every component matches it;
with ``strict`` it must also have no other entity types. No components and not strict: every
entity, ips included. An ``ip`` component with a user or client-id one, an unknown type, a
duplicate type or an exact match without a name: INVALID_REQUEST with Kafka's reason.
"""

from __future__ import annotations

from kafka.protocol.admin import DescribeClientQuotasRequest, DescribeClientQuotasResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import CLUSTER, CLUSTER_DENIED, CLUSTER_NAME, DESCRIBE_CONFIGS, Requires
from ..security.quotas import QuotaError
from . import RequestContext, api


@api(ApiKey.DESCRIBE_CLIENT_QUOTAS, versions=(0, 1),
     authz=(Requires(DESCRIBE_CONFIGS, CLUSTER, CLUSTER_DENIED, "top-level error"),))
async def handle_describe_client_quotas(ctx: RequestContext, req: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    R = ctx.response_class
    if not ctx.authorize(DESCRIBE_CONFIGS, CLUSTER, CLUSTER_NAME):
        return R(throttle_time_ms=0, error_code=int(CLUSTER_DENIED), error_message="Cluster authorization failed.",
                 entries=None)
    try:
        found = ctx.broker.quotas.describe([(c.entity_type, c.match_type, c.match) for c in req.components],
                                           bool(req.strict))
    except QuotaError as e:
        return R(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REQUEST), error_message=str(e), entries=None)
    E = R.EntryData
    entries = []
    for pairs, cfg in found:
        entity = [E.EntityData(entity_type=t, entity_name=name) for t, name in pairs]
        entries.append(E(entity=entity, values=[E.ValueData(key=k, value=float(v)) for k, v in sorted(cfg.items())]))
    return R(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)
