"""The inter-broker client's round trip (broker/cluster/interbroker.py) against a real broker.

``BrokerClient.send_frame`` is the replica fetchers' path: its timeout is one timer on the
channel's waiter. A peer that stops answering (SIGSTOPped) must fail the call with
ConnectionError after about the timeout, close the connection, and the next call after the
peer resumes must reconnect and get its answer.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from kafka.protocol.metadata import ApiVersionsRequest

from broker.cluster.interbroker import BrokerClient
from tests.support.brokers import SamsaBroker


def _api_versions_frame(client: BrokerClient) -> tuple[int, bytes]:
    req = ApiVersionsRequest[0]()
    corr = client.next_correlation_id()
    req.with_header(correlation_id=corr, client_id=client.client_id)
    return corr, bytes(req.encode(header=True, framed=True))


def test_send_frame_times_out_on_a_silent_broker_and_reconnects(tmp_path: Path) -> None:
    broker = SamsaBroker(tmp_path / "data", tmp_path / "broker.log")
    broker.start()
    try:
        host, port = broker.bootstrap.split(":")

        async def scenario() -> tuple[bytes | memoryview, float, str, bytes | memoryview]:
            client = BrokerClient(host, int(port), "test-interbroker")
            corr, frame = _api_versions_frame(client)
            first = await client.send_frame(frame, timeout=5)
            broker.pause()  # SIGSTOP: the socket stays open, nothing answers
            try:
                t0 = time.monotonic()
                try:
                    await client.send_frame(_api_versions_frame(client)[1], timeout=0.5)
                    error = "no error"
                except ConnectionError as e:
                    error = str(e)
                waited = time.monotonic() - t0
            finally:
                broker.resume()
            corr2, frame2 = _api_versions_frame(client)
            again = await client.send_frame(frame2, timeout=10)
            client.close()
            assert int.from_bytes(first[:4], "big") == corr
            assert int.from_bytes(again[:4], "big") == corr2
            return first, waited, error, again

        _first, waited, error, _again = asyncio.run(scenario())
        assert "TimeoutError" in error or "no response" in error, error
        assert 0.4 <= waited < 5, waited  # the timer fired, not the connection's own failure
    finally:
        broker.kill()
