"""DescribeAcls (key 29), versions 1-3 (KIP-140; v1 pattern types, KIP-290; v2 flexible).

Needs DESCRIBE on the CLUSTER (CLUSTER_AUTHORIZATION_FAILED). Without an authorizer:
SECURITY_DISABLED. The filter selects bindings as Kafka's ``AclBindingFilter`` does: ANY
resource/operation/permission, null name/principal/host for "any", pattern type ANY (exact
name, every pattern type) or MATCH (every pattern that applies to the named resource). The
answer groups entries by resource pattern.
"""

from __future__ import annotations

from kafka.protocol.admin import DescribeAclsRequest, DescribeAclsResponse
from kafka.protocol.data_container import DataContainer

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import (
    CLUSTER,
    CLUSTER_DENIED,
    CLUSTER_NAME,
    DESCRIBE,
    AccessControlEntry,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    Requires,
    ResourcePattern,
    ResourceType,
)
from . import RequestContext, api


def filter_from_wire(f: DataContainer, version: int) -> AclBindingFilter:
    """An AclBindingFilter from DescribeAcls' or DeleteAcls' filter fields (validated): ``f`` is a
    DescribeAclsRequest or one of DeleteAclsRequest's DeleteAclsFilter entries."""
    try:
        flt = AclBindingFilter(ResourceType(f.resource_type_filter), f.resource_name_filter,
                               PatternType(f.pattern_type_filter if version >= 1 else PatternType.LITERAL),
                               f.principal_filter, f.host_filter, AclOperation(f.operation),
                               AclPermissionType(f.permission_type))
    except ValueError as e:
        raise AclError(f"Invalid filter: {e}") from e
    flt.validate()
    return flt


@api(ApiKey.DESCRIBE_ACLS, versions=(1, 3), authz=(Requires(DESCRIBE, CLUSTER, CLUSTER_DENIED),))
async def handle_describe_acls(ctx: RequestContext, req: DescribeAclsRequest) -> DescribeAclsResponse:
    R = ctx.response_class
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return R(throttle_time_ms=0, error_code=ErrorCode.SECURITY_DISABLED,
                 error_message="No Authorizer is configured.", resources=[])
    if not ctx.authorize(DESCRIBE, CLUSTER, CLUSTER_NAME):
        return R(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                 error_message="Cluster authorization failed.", resources=[])
    try:
        flt = filter_from_wire(req, ctx.version)
    except AclError as e:
        return R(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, error_message=str(e), resources=[])
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in authorizer.acls(flt):
        grouped.setdefault(b.pattern, []).append(b.entry)
    Res = R.DescribeAclsResource
    return R(throttle_time_ms=0, error_code=0, error_message=None, resources=[
        Res(resource_type=p.resource_type, resource_name=p.name, pattern_type=p.pattern_type, acls=[
            Res.AclDescription(principal=e.principal, host=e.host, operation=e.operation,
                               permission_type=e.permission_type) for e in entries])
        for p, entries in grouped.items()])
