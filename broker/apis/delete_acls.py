"""DeleteAcls (key 31), versions 1-3 (KIP-140; v1 pattern types, KIP-290; v2 flexible).

Needs ALTER on the CLUSTER (CLUSTER_AUTHORIZATION_FAILED per filter); without an authorizer
SECURITY_DISABLED. Each filter (the same rules as DescribeAcls) deletes every binding it
matches and reports them; a binding matched by two filters is reported under both. An
invalid filter answers INVALID_REQUEST and deletes nothing. When the deletions cannot be stored
(ZooKeeper slow or unreachable) every valid filter answers that error (REQUEST_TIMED_OUT, or
UNKNOWN_SERVER_ERROR with ZooKeeper's answer) and nothing is deleted.
"""

from __future__ import annotations

from kafka.protocol.admin import DeleteAclsRequest, DeleteAclsResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import ALTER, CLUSTER, CLUSTER_DENIED, CLUSTER_NAME, AclBindingFilter, AclError, Requires
from . import RequestContext, api
from .describe_acls import filter_from_wire


@api(ApiKey.DELETE_ACLS, versions=(1, 3), authz=(Requires(ALTER, CLUSTER, CLUSTER_DENIED),))
async def handle_delete_acls(ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    R = ctx.response_class
    FR = R.DeleteAclsFilterResult
    M = FR.DeleteAclsMatchingAcl
    authorizer = ctx.broker.authorizer
    n = len(req.filters)
    if authorizer is None:
        return R(throttle_time_ms=0, filter_results=[
            FR(error_code=ErrorCode.SECURITY_DISABLED, error_message="No Authorizer is configured.",
               matching_acls=[])] * n)
    if not ctx.authorize(ALTER, CLUSTER, CLUSTER_NAME):
        return R(throttle_time_ms=0, filter_results=[
            FR(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="Cluster authorization failed.",
               matching_acls=[])] * n)
    parsed: list[AclBindingFilter | str] = []
    for f in req.filters:
        try:
            parsed.append(filter_from_wire(f, ctx.version))
        except AclError as e:
            parsed.append(str(e))
    valid = [f for f in parsed if isinstance(f, AclBindingFilter)]
    failed: KafkaError | None = None
    try:
        deleted = iter(await authorizer.delete_acls(valid))
    except KafkaError as e:
        failed = e
    out = []
    for f in parsed:
        if isinstance(f, str):
            out.append(FR(error_code=ErrorCode.INVALID_REQUEST, error_message=f, matching_acls=[]))
            continue
        if failed is not None:
            out.append(FR(error_code=int(failed.code), error_message=failed.message, matching_acls=[]))
            continue
        out.append(FR(error_code=0, error_message=None, matching_acls=[
            M(error_code=0, error_message=None, resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
              pattern_type=b.pattern.pattern_type, principal=b.entry.principal, host=b.entry.host,
              operation=b.entry.operation, permission_type=b.entry.permission_type) for b in next(deleted)]))
    return R(throttle_time_ms=0, filter_results=out)
