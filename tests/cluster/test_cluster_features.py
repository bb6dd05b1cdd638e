"""Finalized features (KIP-584) in a 3-broker cluster: UpdateFeatures is served by the active
controller only (NOT_CONTROLLER elsewhere), which writes Kafka's ``/feature`` znode; every broker
watches it and answers ApiVersions with the new ``transaction.version`` and epoch."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import UpdateFeaturesRequest, UpdateFeaturesResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from tests.support.cluster import SamsaCluster
from tests.support.rawclient import RawClient
from tests.support.replicas import wait_for


def _finalized(cluster: SamsaCluster, i: int) -> tuple[dict[str, int], int]:
    b = cluster[i]
    with RawClient(b.host, b.port) as c:
        r = c.roundtrip(ApiVersionsRequest[4](client_software_name="t", client_software_version="1"), 4,
                        ApiVersionsResponse)
    return {f.name: f.max_version_level for f in r.finalized_features}, r.finalized_features_epoch


def _update(cluster: SamsaCluster, i: int, level: int, upgrade_type: int) -> Any:
    b = cluster[i]
    U = UpdateFeaturesRequest[1].FeatureUpdateKey
    with RawClient(b.host, b.port) as c:
        return c.roundtrip(UpdateFeaturesRequest[1](timeout_ms=10000, validate_only=False, feature_updates=[
            U(feature="transaction.version", max_version_level=level, upgrade_type=upgrade_type)]), 1,
            UpdateFeaturesResponse)


def test_update_features_goes_through_the_controller_to_every_broker(cluster3: SamsaCluster) -> None:
    controller = cluster3.controller_id()
    other = next(i for i in cluster3.running() if i != controller)  # broker i has broker.id i
    before = {i: _finalized(cluster3, i) for i in cluster3.running()}
    assert {levels["transaction.version"] for levels, _ in before.values()} == {2}
    assert _update(cluster3, other, 1, 2).error_code == 41  # NOT_CONTROLLER
    try:
        assert _update(cluster3, controller, 1, 2).error_code == 0
        for i in cluster3.running():
            got = wait_for(lambda i=i: _finalized(cluster3, i)[0] == {"transaction.version": 1}
                           and _finalized(cluster3, i), 30, f"broker {i} to see transaction.version 1")
            assert got[1] > before[i][1]  # the epoch moved with the znode
    finally:
        assert _update(cluster3, cluster3.controller_id(), 2, 1).error_code == 0  # the session's cluster is shared
    for i in cluster3.running():
        wait_for(lambda i=i: _finalized(cluster3, i)[0] == {"transaction.version": 2}, 30,
                 f"broker {i} back at transaction.version 2")
