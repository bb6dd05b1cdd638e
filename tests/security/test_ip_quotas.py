"""IP connection-rate quotas (KIP-612) over real sockets: ``connection_creation_rate`` on an ``ip``
entity (one address, or the default IP entity) set with ``samsa configs --entity-type ips`` or
AlterClientQuotas; connections from that address past the rate are closed unserved after the
throttle time, other addresses are unaffected, the quota survives a restart, and Kafka's
validation answers INVALID_REQUEST with Kafka's messages.

Clients pick their source address in 127.0.0.0/8 (all loopback), as the connection-limit tests
do. The brokers run ``quota.window.num=2`` (two 1 s samples) so that the held rate shows in a
few seconds (Kafka's rate divides by at least ``num - 1`` windows: with 11 a fresh address
could burst ~10 s worth first). librdkafka (confluent-kafka) has no client-quota admin API, so
quotas are managed with the samsa tool and with kafka-python's protocol classes on the wire.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

from tests.support.metrics import scrape, value
from tests.support.net import connection_burst, free_port, wait_until
from tests.support.rawclient import RawClient

FAST_WINDOWS = {"quota.window.num": 2, "quota.window.size.seconds": 1}
INVALID_REQUEST = 42


def _samsa(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _alter(rc: RawClient, entity: list[tuple[str, str | None]], ops: list[tuple[str, float, bool]],
           validate_only: bool = False) -> tuple[int, str | None]:
    E = AlterClientQuotasRequest.EntryData
    req = AlterClientQuotasRequest(entries=[E(entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                                              ops=[E.OpData(key=k, value=v, remove=r) for k, v, r in ops])],
                                   validate_only=validate_only)
    resp = rc.roundtrip(req, 1, AlterClientQuotasResponse)
    (entry,) = resp.entries
    return entry.error_code, entry.error_message


def _describe(rc: RawClient, components: list[tuple[str, int, str | None]], strict: bool = False) -> Any:
    C = DescribeClientQuotasRequest.ComponentData
    req = DescribeClientQuotasRequest(components=[C(entity_type=t, match_type=m, match=n) for t, m, n in components],
                                      strict=strict)
    resp = rc.roundtrip(req, 1, DescribeClientQuotasResponse)
    if resp.error_code:
        return resp.error_code, resp.error_message
    return sorted((([(e.entity_type, e.entity_name) for e in entry.entity], {v.key: v.value for v in entry.values})
                   for entry in resp.entries), key=repr)


def test_ip_quota_closes_connections_over_the_rate(broker_factory: Any) -> None:
    metrics_port = free_port()
    rate = 5
    b = broker_factory({**FAST_WINDOWS, "metrics.listener": f"http://127.0.0.1:{metrics_port}"})
    bs = ["--bootstrap-server", b.bootstrap]
    out = _samsa("configs", *bs, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.2",
                 "--add-config", f"connection_creation_rate={rate}")
    assert "Completed updating config for ip '127.0.0.2'." in out
    assert "Quota configs for ip '127.0.0.2' are connection_creation_rate=5.0" in \
        _samsa("configs", *bs, "--describe", "--entity-type", "ips")
    seconds = 4.0
    got = connection_burst(b.port, ["127.0.0.2", "127.0.0.1"], seconds)
    served = got["127.0.0.2"].count("ok")
    closed = got["127.0.0.2"].count("closed")
    print(f"127.0.0.2: {len(got['127.0.0.2'])} connections in {seconds} s, {served} served, {closed} closed "
          f"(quota {rate}/s); 127.0.0.1: {got['127.0.0.1'].count('ok')}/{len(got['127.0.0.1'])} served")
    assert served + closed == len(got["127.0.0.2"])
    # about rate/s held over the run (the first window may let a burst of one window through)
    assert 0.7 * rate * seconds <= served <= rate * (seconds + 1.5), got["127.0.0.2"]
    assert closed >= len(got["127.0.0.2"]) - served > 0
    assert got["127.0.0.1"] == ["ok"] * len(got["127.0.0.1"])  # another address is not held
    assert "Throttled connection from /127.0.0.2 on listener PLAINTEXT: the address is over its " \
           "connection_creation_rate quota of 5/s" in b.log_text()
    samples = scrape(metrics_port)
    assert value(samples, "kafka_server_socketservermetrics_connections_rejected_total", listener="PLAINTEXT",
                 reason="ip_connection_rate") == closed
    # removing the quota lifts it at once
    _samsa("configs", *bs, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.2",
           "--delete-config", "connection_creation_rate")
    assert "127.0.0.2" not in _samsa("configs", *bs, "--describe", "--entity-type", "ips")
    got = connection_burst(b.port, ["127.0.0.2"], 1.0, every=0.01)
    assert got["127.0.0.2"] == ["ok"] * len(got["127.0.0.2"])


def test_default_ip_quota_gives_each_address_its_own_rate(broker_factory: Any) -> None:
    rate = 4
    b = broker_factory(FAST_WINDOWS)
    bs = ["--bootstrap-server", b.bootstrap]
    # this test's own tools and the fixture connect from 127.0.0.1: its own quota wins over the default
    _samsa("configs", *bs, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.1",
           "--add-config", "connection_creation_rate=1000")
    out = _samsa("configs", *bs, "--alter", "--entity-type", "ips", "--entity-default",
                 "--add-config", f"connection_creation_rate={rate}")
    assert "Completed updating config for the default ip." in out
    described = _samsa("configs", *bs, "--describe", "--entity-type", "ips")
    assert f"Quota configs for the default ip are connection_creation_rate={float(rate)}" in described
    assert "Quota configs for ip '127.0.0.1' are connection_creation_rate=1000.0" in described
    seconds = 3.0
    got = connection_burst(b.port, ["127.0.0.2", "127.0.0.3", "127.0.0.1"], seconds, every=0.03)
    counts = {s: (r.count("ok"), len(r)) for s, r in got.items()}
    print(f"default {rate}/s for {seconds} s: served/opened {counts}")
    for s in ("127.0.0.2", "127.0.0.3"):  # each address is held on its own
        assert 0.7 * rate * seconds <= counts[s][0] <= rate * (seconds + 1.5), counts
        assert counts[s][0] < counts[s][1]
    assert counts["127.0.0.1"][0] == counts["127.0.0.1"][1]


def test_ip_quota_validation_wire_and_restart(broker_factory: Any) -> None:
    b = broker_factory(FAST_WINDOWS)
    with RawClient(b.host, b.port) as rc:
        # Kafka's errors (ZooKeeper-mode AdminManager): INVALID_REQUEST, nothing stored
        assert _alter(rc, [("ip", "127.0.0.2")], [("producer_byte_rate", 100.0, False)]) == \
            (INVALID_REQUEST, "Invalid configuration key producer_byte_rate")
        assert _alter(rc, [("user", "alice")], [("connection_creation_rate", 5.0, False)]) == \
            (INVALID_REQUEST, "Invalid configuration key connection_creation_rate")
        assert _alter(rc, [("ip", "127.0.0.2"), ("user", "alice")], [("connection_creation_rate", 5.0, False)]) == \
            (INVALID_REQUEST, "Invalid quota entity combination, IP entity should not be used with user/client "
                              "ID entity.")
        assert _alter(rc, [("ip", "no-such-host.invalid")], [("connection_creation_rate", 5.0, False)]) == \
            (INVALID_REQUEST, "no-such-host.invalid is not a valid IP or resolvable host.")
        assert _alter(rc, [("ip", "127.0.0.2")], [("connection_creation_rate", 2.5, False)]) == \
            (INVALID_REQUEST, "Configuration connection_creation_rate must be a INT value")
        assert _alter(rc, [("ip", "")], [("connection_creation_rate", 5.0, False)]) == \
            (INVALID_REQUEST, "Empty ip not supported")
        assert _alter(rc, [("ip", "127.0.0.2")], [("connection_creation_rate", 3.0, False)], validate_only=True) \
            == (0, None)
        assert _describe(rc, [("ip", 2, None)]) == []
        # set a specific address, the default ip entity and a client quota
        assert _alter(rc, [("ip", "127.0.0.2")], [("connection_creation_rate", 2.0, False)]) == (0, None)
        assert _alter(rc, [("ip", None)], [("connection_creation_rate", 1000.0, False)]) == (0, None)
        assert _alter(rc, [("client-id", "c")], [("producer_byte_rate", 1000.0, False)]) == (0, None)
        ip2 = ([("ip", "127.0.0.2")], {"connection_creation_rate": 2.0})
        default = ([("ip", None)], {"connection_creation_rate": 1000.0})
        client = ([("client-id", "c")], {"producer_byte_rate": 1000.0})
        assert _describe(rc, [("ip", 0, "127.0.0.2")]) == [ip2]
        assert _describe(rc, [("ip", 1, None)]) == [default]
        assert _describe(rc, [("ip", 2, None)], strict=True) == sorted([ip2, default], key=repr)
        assert _describe(rc, []) == sorted([ip2, default, client], key=repr)  # no filter: every entity
        assert _describe(rc, [], strict=True) == []
        assert _describe(rc, [("client-id", 2, None)]) == [client]
        assert _describe(rc, [("ip", 2, None), ("user", 2, None)]) == (
            INVALID_REQUEST, "Invalid entity filter component combination, IP filter component should not be used "
                             "with user or clientId filter component.")
    b.restart()
    with RawClient(b.host, b.port) as rc:
        assert _describe(rc, []) == sorted([ip2, default, client], key=repr)
    got = connection_burst(b.port, ["127.0.0.2"], 2.0, every=0.05)["127.0.0.2"]
    print(f"after restart, 127.0.0.2 at 2/s: {got.count('ok')} of {len(got)} served")
    assert 0 < got.count("ok") <= 2 * 3.5 < len(got)
    assert wait_until(lambda: "Throttled connection from /127.0.0.2" in b.log_text(), 5)


def test_ip_entity_in_kafka_configs_style_errors(broker_factory: Any) -> None:
    b = broker_factory(FAST_WINDOWS)
    proc = subprocess.run([sys.executable, "-m", "broker.cli", "configs", "--bootstrap-server", b.bootstrap,
                           "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.9",
                           "--add-config", "producer_byte_rate=10"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "INVALID_REQUEST: Invalid configuration key producer_byte_rate" in proc.stderr + proc.stdout
