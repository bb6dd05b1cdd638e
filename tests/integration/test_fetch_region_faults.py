"""A Fetch whose segment region can no longer be read whole, against a live broker.

The fetch path hands each partition's records to the connection as a region of its segment
file (protocol/fetch_codec.py), read only when the response is written. If the file lost its
tail in between (here: cut on disk under the broker), the response's length prefix promises
bytes that are not there. Kafka's own answer to an unreadable log is to close the client's
connection; a frame shorter than its prefix would instead leave the client waiting for the
rest, a hang. So: that connection closes, the broker logs why, and it goes on serving.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from tests.support.net import wait_until
from tests.support.rawclient import RawClient, build_batch

pytestmark = pytest.mark.timeout(120)

TOPIC = "cut-under-fetch"


def test_a_segment_cut_under_a_fetch_closes_that_connection_and_the_broker_serves_on(broker_factory: Any) -> None:
    b = broker_factory()
    with RawClient(b.host, b.port, timeout=10.0) as c:
        T = MetadataRequest.MetadataRequestTopic
        md = c.roundtrip(MetadataRequest(topics=[T(name=TOPIC, topic_id=None)], allow_auto_topic_creation=True),
                         12, MetadataResponse)
        assert md.topics[0].error_code == 0
        sizes = []
        for i in range(3):
            batch = build_batch([(None, os.urandom(2000), []) for _ in range(10)], base_offset=0)
            code, base = c.produce(TOPIC, 0, batch)
            assert (code, base) == (0, 10 * i)
            sizes.append(len(batch))
    segment = b.data_dir / f"{TOPIC}-0" / "00000000000000000000.log"
    assert segment.stat().st_size == sum(sizes)
    os.truncate(segment, sum(sizes) - 100)  # the last batch loses its tail

    with RawClient(b.host, b.port, timeout=10.0) as c:
        with pytest.raises((ConnectionError, socket.timeout)) as closed:
            c.fetch_raw(TOPIC, 0, 0)
        assert isinstance(closed.value, ConnectionError), "the broker sent a short frame instead of closing"
    assert wait_until(lambda: f"{segment}@0 read {sum(sizes) - 100} of its {sum(sizes)} bytes" in b.log_text(), 10), \
        b.log_text()[-2000:]

    with RawClient(b.host, b.port, timeout=10.0) as c:  # what is whole on disk is still served
        code, hw, records = c.fetch_raw(TOPIC, 0, 0, max_bytes=sizes[0])
        assert (code, hw) == (0, 30)
        assert len(records) == sizes[0]
