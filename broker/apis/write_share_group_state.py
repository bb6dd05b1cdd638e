"""WriteShareGroupState (key 85), version 0, inter-broker: a partition leader records what changed
in its share-partitions (start offset, state batches) with the share coordinator that owns them
(KIP-932; see :mod:`broker.share.persister`). The coordinator writes a ShareUpdate (or every so
many a ShareSnapshot) to ``__share_group_state`` before answering.

NOT_COORDINATOR when this broker does not lead the key's ``__share_group_state`` partition.
Authorization: CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from broker.share.persister import owns
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import CLUSTER, CLUSTER_ACTION, CLUSTER_DENIED, CLUSTER_NAME, Requires
from . import RequestContext, api


@api(ApiKey.WRITE_SHARE_GROUP_STATE, versions=(0, 0), authz=(
    Requires(CLUSTER_ACTION, CLUSTER, CLUSTER_DENIED, "every partition"),))
async def handle_write_share_group_state(ctx: RequestContext, req: Any) -> Any:
    R = ctx.response_class
    T = R.WriteStateResult
    P = T.PartitionResult
    allowed = ctx.authorize(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
    coord = ctx.broker.share_coordinator
    out = []
    for t in req.topics or []:
        ps = []
        for p in t.partitions or []:
            key = (req.group_id, t.topic_id, p.partition)
            code = ErrorCode.NONE
            if not allowed:
                code = CLUSTER_DENIED
            elif coord is None or not owns(ctx.broker, coord, key):
                code = ErrorCode.NOT_COORDINATOR
            else:
                try:
                    await coord.ensure_loaded(key)
                    await coord.write(key, p.start_offset, [
                        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                        for b in p.state_batches or []], p.leader_epoch)
                except KafkaError as e:
                    code = e.code
            ps.append(P(partition=p.partition, error_code=int(code), error_message=None))
        out.append(T(topic_id=t.topic_id, partitions=ps))
    return R(results=out)
