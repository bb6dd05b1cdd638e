"""AlterClientQuotas (key 49), versions 0-1 (KIP-546; v1 flexible).

Needs ALTER_CONFIGS on the CLUSTER (CLUSTER_AUTHORIZATION_FAILED for every entry). Each entry
names an entity (``user`` and/or ``client-id``, or ``ip`` alone; a null name is the default
entity) and ops that set a quota or remove it: ``producer_byte_rate``, ``consumer_byte_rate``,
``request_percentage``, ``controller_mutation_rate`` for users and client ids, only
``connection_creation_rate`` (an integer, KIP-612) for an ip. Invalid entries answer
INVALID_REQUEST with Kafka's message and change nothing; the valid ones are stored together
(unless ``validate_only``) and enforced from the next request (an ip's: the next connection) on.
When they cannot be stored (ZooKeeper slow or unreachable) each of them answers that error
(REQUEST_TIMED_OUT, or UNKNOWN_SERVER_ERROR with ZooKeeper's answer) and none is in force.
"""

from __future__ import annotations

from kafka.protocol.admin import AlterClientQuotasRequest, AlterClientQuotasResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import ALTER_CONFIGS, CLUSTER, CLUSTER_DENIED, CLUSTER_NAME, Requires
from ..security.quotas import QuotaError
from . import RequestContext, api


@api(ApiKey.ALTER_CLIENT_QUOTAS, versions=(0, 1),
     authz=(Requires(ALTER_CONFIGS, CLUSTER, CLUSTER_DENIED, "every entry"),))
async def handle_alter_client_quotas(ctx: RequestContext, req: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    R = ctx.response_class
    E = R.EntryData
    quotas = ctx.broker.quotas
    allowed = ctx.authorize(ALTER_CONFIGS, CLUSTER, CLUSTER_NAME)
    out = []
    changes = []
    for entry in req.entries:
        code, message = ErrorCode.NONE, None
        try:
            if not allowed:
                raise QuotaError("Cluster authorization failed.")
            entity = quotas.entity_from_wire([(e.entity_type, e.entity_name) for e in entry.entity])
            ops = [(o.key, float(o.value), bool(o.remove)) for o in entry.ops]
            quotas.validate(ops, entity)
            changes.append((entity, ops))
        except QuotaError as e:
            code = CLUSTER_DENIED if not allowed else ErrorCode.INVALID_REQUEST
            message = str(e)
        out.append(E(error_code=int(code), error_message=message, entity=[
            E.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity]))
    if changes and not req.validate_only:
        try:
            await quotas.alter(changes)
        except KafkaError as e:
            for answer in out:
                if answer.error_code == ErrorCode.NONE:
                    answer.error_code, answer.error_message = int(e.code), e.message
    return R(throttle_time_ms=0, entries=out)
