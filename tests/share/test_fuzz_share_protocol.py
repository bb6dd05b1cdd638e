"""Fuzzing the KIP-932 APIs like the others (tests/integration/test_fuzz.py): valid
ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge,
DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets and the inter-broker
Initialize/Read/WriteShareGroupState requests, mutated
(bytes flipped, inserted, deleted, appended). Whatever comes back must carry the request's
correlation id, and the broker must stay healthy (it produces and fetches, its log is clean).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from protocol import kip932
from tests.integration.test_fuzz import (  # noqa: F401 - fixtures
    _report_log,
    assert_healthy,
    fuzz_broker,
    fuzz_settings,
    mutate,
    mutations,
    observe,
)

CORR = 9320
TID = uuid.UUID(int=9)


def _requests() -> list[Any]:
    F = kip932.ShareFetchRequest.FetchTopic
    A = kip932.ShareAcknowledgeRequest.AcknowledgeTopic
    RS = kip932.ReadShareGroupStateRequest.ReadStateData
    IS = kip932.InitializeShareGroupStateRequest.InitializeStateData
    WS = kip932.WriteShareGroupStateRequest.WriteStateData
    return [
        kip932.ShareGroupHeartbeatRequest(group_id="fz", member_id="fuzz-member", member_epoch=0,
                                          rack_id=None, subscribed_topic_names=["a", "b"]),
        kip932.ShareGroupDescribeRequest(group_ids=["fz", "other"], include_authorized_operations=True),
        kip932.ShareFetchRequest(
            group_id="fz", member_id="fuzz-member", share_session_epoch=0, max_wait_ms=10, min_bytes=1,
            max_bytes=1000, max_records=10, batch_size=10,
            topics=[F(topic_id=TID, partitions=[F.FetchPartition(partition_index=0, acknowledgement_batches=[
                F.FetchPartition.AcknowledgementBatch(first_offset=0, last_offset=2, acknowledge_types=[1])])])],
            forgotten_topics_data=[kip932.ShareFetchRequest.ForgottenTopic(topic_id=TID, partitions=[1])]),
        kip932.ShareAcknowledgeRequest(
            group_id="fz", member_id="fuzz-member", share_session_epoch=1,
            topics=[A(topic_id=TID, partitions=[A.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                A.AcknowledgePartition.AcknowledgementBatch(first_offset=0, last_offset=1,
                                                            acknowledge_types=[2, 3])])])]),
        kip932.DescribeShareGroupOffsetsRequest(groups=[
            kip932.DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(group_id="fz", topics=None)]),
        kip932.AlterShareGroupOffsetsRequest(group_id="fz", topics=[
            kip932.AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic(topic_name="a", partitions=[
                kip932.AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
                .AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=5)])]),
        kip932.DeleteShareGroupOffsetsRequest(group_id="fz", topics=[
            kip932.DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(topic_name="a")]),
        kip932.ReadShareGroupStateRequest(group_id="fz", topics=[RS(topic_id=TID, partitions=[
            RS.PartitionData(partition=0, leader_epoch=1)])]),
        kip932.InitializeShareGroupStateRequest(group_id="fz", topics=[IS(topic_id=TID, partitions=[
            IS.PartitionData(partition=0, state_epoch=0, start_offset=3)])]),
        kip932.WriteShareGroupStateRequest(group_id="fz", topics=[WS(topic_id=TID, partitions=[WS.PartitionData(
            partition=0, state_epoch=0, leader_epoch=1, start_offset=3, state_batches=[
                WS.PartitionData.StateBatch(first_offset=3, last_offset=5, delivery_state=2, delivery_count=1)])])]),
    ]


@fuzz_settings(60)
@given(data=st.data())
def test_mutated_kip932_requests(fuzz_broker: Any, data: st.DataObject) -> None:  # noqa: F811
    req = data.draw(st.sampled_from(_requests()), "request")
    req.with_header(correlation_id=CORR, client_id="fuzz")
    version = 1 if req.API_KEY in (76, 77, 78, 79) else 0  # the client APIs at v1, the others at v0
    payload = bytes(req.encode(version=version, header=True, framed=False))
    header_len = 2 + 2 + 4 + 2 + len(b"fuzz") + 1  # flexible: one tagged-fields byte
    body = mutate(payload[header_len:], data.draw(mutations, "mutations"))
    frame = payload[:header_len] + body
    got = observe(fuzz_broker, struct.pack(">i", len(frame)) + frame, want_frames=1, wait=2.0)
    if got.frames:
        (corr,) = struct.unpack_from(">i", got.frames[0])
        assert corr == CORR, f"{type(req).__name__}: correlation id {corr}"
    assert_healthy(fuzz_broker)
