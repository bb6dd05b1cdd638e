"""Fuzzing the KIP-848 APIs like the others (tests/integration/test_fuzz.py): valid
ConsumerGroupHeartbeat and ConsumerGroupDescribe requests at each served version, mutated
(bytes flipped, inserted, deleted, appended). Whatever comes back must carry the request's
correlation id, and the broker must stay healthy (it produces and fetches, its log is clean).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from protocol.kip848 import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from tests.integration.test_fuzz import (  # noqa: F401 - fixtures
    _report_log,
    assert_healthy,
    fuzz_broker,
    fuzz_settings,
    mutate,
    mutations,
    observe,
)

CORR = 4848


def _requests(version: int) -> list[Any]:
    TP = ConsumerGroupHeartbeatRequest.TopicPartitions
    hb: dict[str, Any] = dict(group_id="fz", member_id="fuzz-member", member_epoch=0, instance_id="i",
                              rack_id=None, rebalance_timeout_ms=1000, subscribed_topic_names=["a", "b"],
                              server_assignor="range",
                              topic_partitions=[TP(topic_id=uuid.UUID(int=7), partitions=[0, 1])])
    if version >= 1:
        hb["subscribed_topic_regex"] = "a.*"
    return [ConsumerGroupHeartbeatRequest(**hb),
            ConsumerGroupDescribeRequest(group_ids=["fz", "other"], include_authorized_operations=True)]


@fuzz_settings(60)
@given(data=st.data())
def test_mutated_kip848_requests(fuzz_broker: Any, data: st.DataObject) -> None:  # noqa: F811
    version = data.draw(st.integers(0, 1), "version")
    req = data.draw(st.sampled_from(_requests(version)), "request")
    req.with_header(correlation_id=CORR, client_id="fuzz")
    payload = bytes(req.encode(version=version, header=True, framed=False))
    header_len = 2 + 2 + 4 + 2 + len(b"fuzz") + 1  # flexible: one tagged-fields byte
    body = mutate(payload[header_len:], data.draw(mutations, "mutations"))
    frame = payload[:header_len] + body
    got = observe(fuzz_broker, struct.pack(">i", len(frame)) + frame, want_frames=1, wait=2.0)
    if got.frames:
        (corr,) = struct.unpack_from(">i", got.frames[0])
        assert corr == CORR, f"{type(req).__name__} v{version}: correlation id {corr}"
    assert_healthy(fuzz_broker)
