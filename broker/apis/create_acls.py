"""CreateAcls (key 30), versions 1-3 (KIP-140; v1 pattern types, KIP-290; v2 flexible).

Needs ALTER on the CLUSTER (CLUSTER_AUTHORIZATION_FAILED for every creation otherwise); without
an authorizer every creation answers SECURITY_DISABLED, as Kafka does. Each creation is
validated on its own (INVALID_REQUEST with the reason: UNKNOWN/ANY/MATCH values, a bad
principal, an operation the resource type does not support, a CLUSTER name other than
``kafka-cluster``); the valid ones are stored together, then in force for the next request.
When they cannot be stored (ZooKeeper slow or unreachable), each of them answers that error
(REQUEST_TIMED_OUT, or UNKNOWN_SERVER_ERROR with ZooKeeper's answer) and none is in force.
"""

from __future__ import annotations

from kafka.protocol.admin import CreateAclsRequest, CreateAclsResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import (
    ALTER,
    CLUSTER,
    CLUSTER_DENIED,
    CLUSTER_NAME,
    AclBinding,
    AclError,
    Requires,
    make_binding,
)
from . import RequestContext, api


@api(ApiKey.CREATE_ACLS, versions=(1, 3), authz=(Requires(ALTER, CLUSTER, CLUSTER_DENIED),))
async def handle_create_acls(ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    R = ctx.response_class
    authorizer = ctx.broker.authorizer
    n = len(req.creations)
    if authorizer is None:
        return R(throttle_time_ms=0, results=[
            R.AclCreationResult(error_code=ErrorCode.SECURITY_DISABLED, error_message="No Authorizer is configured.")
        ] * n)
    if not ctx.authorize(ALTER, CLUSTER, CLUSTER_NAME):
        return R(throttle_time_ms=0, results=[
            R.AclCreationResult(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                error_message="Cluster authorization failed.")] * n)
    results: list[tuple[int, str | None]] = []
    valid: list[AclBinding] = []
    for c in req.creations:
        try:
            valid.append(make_binding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal,
                                      c.host, c.operation, c.permission_type))
            results.append((0, None))
        except AclError as e:
            results.append((ErrorCode.INVALID_REQUEST, str(e)))
    try:
        await authorizer.create_acls(valid)
    except KafkaError as e:
        results = [(int(e.code), e.message) if code == 0 else (code, msg) for code, msg in results]
    return R(throttle_time_ms=0, results=[R.AclCreationResult(error_code=code, error_message=msg)
                                          for code, msg in results])
