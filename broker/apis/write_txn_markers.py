"""WriteTxnMarkers (key 27), versions 1-2.

In Kafka the transaction coordinator sends this to each partition leader to write the
COMMIT/ABORT control batches of a finished transaction. Samsa's coordinator writes markers
in-process through the same ``TransactionMarkerWriter.write_marker``
(``broker/coordinators/transactions.py``) this handler uses; the API is served for tools and
tests that drive it directly (e.g. ``kafka-transactions.sh abort``-style recovery of hanging
transactions).

Each marker is one control batch with the producer id/epoch and the coordinator epoch, written
to every listed partition: it closes that producer's open transaction there (the last stable
offset advances) and an ABORT lands in the aborted-transaction index. Errors are per
partition: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH for a marker older than the
producer's epoch. v1 is the first flexible version (v0 is gone from Kafka); v2 adds
``transaction_version`` (KIP-890), which does not change what is written.
"""

from __future__ import annotations

from kafka.protocol.producer import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from protocol.api_keys import ApiKey
from txn.markers import TxnMarker

from ..security.acl import CLUSTER, CLUSTER_ACTION, CLUSTER_DENIED, CLUSTER_NAME, Requires
from . import RequestContext, api


@api(ApiKey.WRITE_TXN_MARKERS, versions=(1, 2), authz=(
    Requires(CLUSTER_ACTION, CLUSTER, CLUSTER_DENIED, "every partition"),))
async def handle_write_txn_markers(ctx: RequestContext, req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    R = ctx.response_class
    MarkerResult = R.WritableTxnMarkerResult
    TopicResult = MarkerResult.WritableTxnMarkerTopicResult
    PartResult = TopicResult.WritableTxnMarkerPartitionResult
    out = []
    allowed = ctx.authorize(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
    markers = ctx.broker.txn_markers  # built before the listeners open
    for m in req.markers:
        if not allowed or markers is None:
            out.append(MarkerResult(producer_id=m.producer_id, topics=[
                TopicResult(name=t.name, partitions=[PartResult(partition_index=p, error_code=int(CLUSTER_DENIED))
                                                     for p in t.partition_indexes]) for t in m.topics]))
            continue
        marker = TxnMarker(m.producer_id, m.producer_epoch, m.coordinator_epoch, bool(m.transaction_result))
        topics = []
        for t in m.topics:
            parts = [PartResult(partition_index=p, error_code=int(await markers.write_marker(t.name, p, marker)))
                     for p in t.partition_indexes]
            topics.append(TopicResult(name=t.name, partitions=parts))
        out.append(MarkerResult(producer_id=m.producer_id, topics=topics))
    return R(markers=out)
