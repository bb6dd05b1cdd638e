"""TxnOffsetCommit (key 28), versions 0-5.

The second half of ``sendOffsetsToTransaction`` (KIP-98; KIP-447 for v3+): the producer sends
the consumer group's offsets to the group coordinator, which holds them back until the
transaction's COMMIT marker reaches the group's ``__consumer_offsets`` partition (an ABORT
drops them). So the group's committed offsets move exactly when the transaction's output
becomes visible: consume-transform-produce is exactly once.

* The producer must be the current one for the transactional id: otherwise PRODUCER_FENCED
  (INVALID_PRODUCER_EPOCH for v0-2, as Kafka maps it) or INVALID_PRODUCER_ID_MAPPING; the
  group's partition must have been added with AddOffsetsToTxn (else INVALID_TXN_STATE).
* v3+ (KIP-447) carries the consumer's ``member_id``/``generation_id``/``group_instance_id``
  so a zombie consumer's offsets are refused (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
  FENCED_INSTANCE_ID); v0-2 skip those checks. v2 adds ``committed_leader_epoch``; v3+ is
  flexible. v5 is transactions v2 (KIP-890 part 2): the producer sends no AddOffsetsToTxn, so the
  group's ``__consumer_offsets`` partition joins the transaction here, implicitly (asking the
  coordinator broker with AddPartitionsToTxn v5 when it is another one).
* Unknown topics get UNKNOWN_TOPIC_OR_PARTITION per partition.

The group coordinator (``groupcoord``) writes the offsets at once as one transactional batch
(producer id and epoch) to the group's ``__consumer_offsets`` partition and holds them pending;
the transaction's marker there publishes or drops them (``broker/coordinators/transactions.py`` tells it), so they
survive a broker crash between EndTxn and the markers, as in Kafka.
"""

from __future__ import annotations

from kafka.protocol.data_container import DataContainer
from kafka.protocol.producer import TxnOffsetCommitRequest, TxnOffsetCommitResponse

from groupcoord.group import OffsetAndMetadata
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import (
    GROUP,
    GROUP_DENIED,
    READ,
    TOPIC,
    TOPIC_DENIED,
    TRANSACTIONAL_ID,
    TXN_DENIED,
    WRITE,
    Requires,
)
from . import RequestContext, api


@api(ApiKey.TXN_OFFSET_COMMIT, versions=(0, 5), authz=(
    Requires(WRITE, TRANSACTIONAL_ID, TXN_DENIED, "transactional_id: every partition"),
    Requires(READ, GROUP, GROUP_DENIED, "group_id: every partition"), Requires(READ, TOPIC, TOPIC_DENIED, "each topic")))
async def handle_txn_offset_commit(ctx: RequestContext, req: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    R = ctx.response_class
    TopicResp = R.TxnOffsetCommitResponseTopic
    PartResp = TopicResp.TxnOffsetCommitResponsePartition
    broker = ctx.broker
    coord = broker.txn_coordinator
    gc = broker.group_coordinator
    verifier = broker.txn_verifier
    v = ctx.version
    member_id = req.member_id if v >= 3 else ""
    generation_id = req.generation_id if v >= 3 else -1
    instance_id = req.group_instance_id if v >= 3 else None

    requested = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    results: dict[tuple[str, int], ErrorCode] = {}
    code = ErrorCode.NONE
    if not ctx.authorize(WRITE, TRANSACTIONAL_ID, req.transactional_id):
        code = TXN_DENIED
    elif not ctx.authorize(READ, GROUP, req.group_id):
        code = GROUP_DENIED
    elif coord is None or gc is None or verifier is None:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    elif not req.group_id:
        code = ErrorCode.INVALID_GROUP_ID
    else:
        # in a cluster the transaction's coordinator may be another broker: ask it (KIP-890)
        offsets_topic, offsets_partition = coord.offsets_partition(req.group_id)
        remote = await verifier.verify_remotely(req.transactional_id, req.producer_id, req.producer_epoch,
                                                offsets_topic, offsets_partition, add=v >= 5)
        if remote is None and v >= 5:
            remote = await verifier.add_locally(req.transactional_id, req.producer_id, req.producer_epoch,
                                                offsets_topic, offsets_partition)
            if remote is ErrorCode.NONE:
                remote = None  # added: validate below as for v0-4
        if remote is not None:
            code = remote
        else:
            try:
                coord.validate_txn_offset_commit(req.transactional_id, req.producer_id, req.producer_epoch,
                                                 req.group_id)
            except KafkaError as e:
                code = e.code
    if code is ErrorCode.PRODUCER_FENCED and v < 3:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    if code is not ErrorCode.NONE:
        results = dict.fromkeys(requested, code)
    else:
        offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        for t in req.topics:
            topic_ok = ctx.authorize(READ, TOPIC, t.name)
            for p in t.partitions:
                if not topic_ok:
                    results[(t.name, p.partition_index)] = TOPIC_DENIED
                    continue
                if not broker.replica_manager.partition_exists(t.name, p.partition_index):
                    results[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                epoch = p.committed_leader_epoch if v >= 2 else -1
                offsets[(t.name, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset, epoch, p.committed_metadata or "")
        if offsets:
            res = await gc.txn_commit_offsets(req.group_id, req.producer_id, req.producer_epoch, member_id,
                                              generation_id, instance_id, offsets)
            results.update({tp: ErrorCode(c) for tp, c in res.items()})
    by_topic: dict[str, list[DataContainer]] = {}
    for topic, pi in requested:
        c = results.get((topic, pi), ErrorCode.NONE)
        by_topic.setdefault(topic, []).append(PartResp(partition_index=pi, error_code=int(c)))
    return R(throttle_time_ms=0, topics=[TopicResp(name=t, partitions=ps) for t, ps in by_topic.items()])

