"""ReadShareGroupState (key 84), version 0, inter-broker: a partition leader reads the persisted
state of its share-partitions from the share coordinator that owns them (KIP-932; see
:mod:`broker.share.persister`).

For each (group, topic id, partition): the start offset, state epoch and state batches the
coordinator holds (:mod:`groupcoord.share.state`), StartOffset -1 when there is none.
NOT_COORDINATOR when this broker does not lead the key's ``__share_group_state`` partition.
Authorization: CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED), as Kafka's
inter-broker APIs.
"""

from __future__ import annotations

from typing import Any

from broker.share.persister import owns
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import CLUSTER, CLUSTER_ACTION, CLUSTER_DENIED, CLUSTER_NAME, Requires
from . import RequestContext, api


@api(ApiKey.READ_SHARE_GROUP_STATE, versions=(0, 0), authz=(
    Requires(CLUSTER_ACTION, CLUSTER, CLUSTER_DENIED, "every partition"),))
async def handle_read_share_group_state(ctx: RequestContext, req: Any) -> Any:
    R = ctx.response_class
    T = R.ReadStateResult
    P = T.PartitionResult
    allowed = ctx.authorize(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
    coord = ctx.broker.share_coordinator
    out = []
    for t in req.topics or []:
        ps = []
        for p in t.partitions or []:
            key = (req.group_id, t.topic_id, p.partition)
            code, state = ErrorCode.NONE, None
            if not allowed:
                code = CLUSTER_DENIED
            elif coord is None or not owns(ctx.broker, coord, key):
                code = ErrorCode.NOT_COORDINATOR
            else:
                try:
                    await coord.ensure_loaded(key)
                    state = coord.read_state(key)
                except KafkaError as e:
                    code = e.code
            ps.append(P(partition=p.partition, error_code=int(code), error_message=None,
                        state_epoch=state.state_epoch if state else 0,
                        start_offset=state.start_offset if state else -1,
                        state_batches=[P.StateBatch(first_offset=f, last_offset=la, delivery_state=s,
                                                    delivery_count=c) for f, la, s, c in state.batches]
                        if state else []))
        out.append(T(topic_id=t.topic_id, partitions=ps))
    return R(results=out)
