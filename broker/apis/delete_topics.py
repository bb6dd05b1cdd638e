"""DeleteTopics (key 20), versions 1-6.

Deletes topics by name (v0-5 ``topic_names``) or by name or id (v6, KIP-516). The topic
leaves the registry first, so clients stop seeing it at once; its partition directories are
renamed ``<topic>-<partition>.<id>-delete`` and removed, as Kafka does. Unknown topics get
UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by id); ``delete.topic.enable=false`` gives
TOPIC_DELETION_DISABLED.

In a cluster the deletion is queued in ZooKeeper (``/admin/delete_topics``) for the controller,
which stops the replicas and removes the topic's znodes; the answer waits, up to the request's
``timeout_ms``, until no live broker's Metadata lists the topic any more (Kafka's
DelayedDeleteTopics waits until the broker that was asked no longer has it in its metadata
cache; see ``ZkMetadataSupport.await_topic_metadata`` for why every broker is asked here), so a client
that lists topics anywhere after the answer does not find it. ``timeout_ms`` 0 answers at once.
"""

from __future__ import annotations

import logging
import uuid

from kafka.protocol.admin import DeleteTopicsRequest, DeleteTopicsResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import DELETE, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api

log = logging.getLogger("samsa.admin")

ZERO = uuid.UUID(int=0)


@api(ApiKey.DELETE_TOPICS, versions=(1, 6), authz=(Requires(DELETE, TOPIC, TOPIC_DENIED, "each topic"),))
async def handle_delete_topics(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    broker = ctx.broker
    R = ctx.response_class
    Result = R.DeletableTopicResult
    if ctx.version >= 6:
        targets = [(t.name, t.topic_id) for t in req.topics]
    else:
        targets = [(n, None) for n in req.topic_names]
    out = []
    queued: dict[str, int] = {}  # topic -> partitions
    for name, tid in targets:
        code, message = ErrorCode.NONE, None
        try:
            if not broker.config["delete.topic.enable"]:
                raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            if not name and tid is not None and tid != ZERO:
                info = broker.topics.by_id(tid)
                if info is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, f"Topic id {tid} does not exist")
                name = info.name
            if name and not ctx.authorize(DELETE, TOPIC, name):
                raise KafkaError(TOPIC_DENIED, "Topic authorization failed.")
            info = broker.topics.get(name) if name else None
            if info is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
            tid = info.topic_id
            await broker.metadata_support.delete_topic(info.name)
            queued[info.name] = info.num_partitions
        except KafkaError as e:
            code, message = e.code, e.message
        out.append(Result(name=name, topic_id=tid or ZERO, error_code=int(code), error_message=message))
    timeout = req.timeout_ms / 1000
    if queued and timeout > 0:
        lagging = await broker.metadata_support.await_topic_metadata(queued, present=False, timeout=timeout)
        if lagging:
            log.warning("DeleteTopics: brokers %s still listed %s after %.0f ms", lagging, sorted(queued),
                        timeout * 1000)
    return R(throttle_time_ms=0, responses=out)
