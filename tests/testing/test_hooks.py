"""broker/hooks.py: error responses shaped like the request, for every API the broker serves."""

from __future__ import annotations

import pytest

from broker import apis
from broker.hooks import Fault, error_response, request_topics
from protocol.messages import REQUEST_CLASSES, RESPONSE_CLASSES, encode_response

SPECS = sorted(apis.load_all().values(), key=lambda s: s.key)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_error_response_encodes_at_every_version(spec):
    for v in range(spec.min_version, spec.max_version + 1):
        req = REQUEST_CLASSES[spec.key](version=v)
        resp = error_response(RESPONSE_CLASSES[spec.key], req, 6)
        resp_v = type(resp)
        assert resp_v.API_KEY == spec.key
        assert encode_response(spec.key, v, 7, resp)


def test_produce_error_per_partition():
    P = REQUEST_CLASSES[0]
    T = P.TopicProduceData
    req = P(version=9, transactional_id=None, acks=-1, timeout_ms=100, topic_data=[
        T(name="orders", partition_data=[T.PartitionProduceData(index=2, records=b""),
                                         T.PartitionProduceData(index=5, records=b"")]),
        T(name="audit", partition_data=[T.PartitionProduceData(index=0, records=b"")])])
    resp = error_response(RESPONSE_CLASSES[0], req, 6)
    got = {(t.name, p.index): (p.error_code, p.base_offset) for t in resp.responses for p in t.partition_responses}
    assert got == {("orders", 2): (6, -1), ("orders", 5): (6, -1), ("audit", 0): (6, -1)}
    assert request_topics(req) == {"orders", "audit"}


def test_offset_fetch_plain_partition_list_and_group_error():
    OF = REQUEST_CLASSES[9]
    G = OF.OffsetFetchRequestGroup
    req = OF(version=8, require_stable=False, groups=[
        G(group_id="g", topics=[G.OffsetFetchRequestTopics(name="t", partition_indexes=[0, 1])])])
    resp = error_response(RESPONSE_CLASSES[9], req, 16)
    (group,) = resp.groups
    assert group.group_id == "g" and group.error_code == 16
    assert [(p.partition_index, p.error_code, p.committed_offset) for p in group.topics[0].partitions] == \
        [(0, 16, -1), (1, 16, -1)]


def test_find_coordinator_keys_become_coordinators():
    F = REQUEST_CLASSES[10]
    resp = error_response(RESPONSE_CLASSES[10], F(version=4, key_type=0, coordinator_keys=["a", "b"]), 15)
    assert [(c.key, c.error_code) for c in resp.coordinators] == [("a", 15), ("b", 15)]


def test_fault_rejects_contradictions():
    with pytest.raises(ValueError):
        Fault(error=6, drop_response=True)
    with pytest.raises(ValueError):
        Fault(drop_response=True, close_connection=True)
    with pytest.raises(ValueError):
        Fault(delay_ms=-1)
