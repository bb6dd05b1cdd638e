"""The rig's network on its own (no brokers): hosts reach each other and the root namespace through
the bridge, a cut stops exactly the traffic it names, a heal restores it, and nothing is left
behind, not even by a run that died."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.jepsen.net import NETNS_DIR, NS_PREFIX, Network, cleanup_stale, netns_unavailable, run, wait_for

REASON = netns_unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

SERVER = ("import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
          "s.bind((sys.argv[1], 7000)); s.listen(16)\n"
          "while True:\n c,_=s.accept(); c.sendall(b'hi'); c.close()")
PROBE = ("import socket,sys\ntry:\n s=socket.create_connection((sys.argv[1], 7000), timeout=1.5); "
         "print(s.recv(2).decode())\nexcept OSError as e:\n print('no', e)")


@pytest.fixture
def net() -> Iterator[Network]:
    n = Network(["a", "b", "c"]).create()
    server = subprocess.Popen([*n.prefix("b"), sys.executable, "-c", SERVER, n.ip("b")])
    try:
        assert wait_for(lambda: reach(n, None, "b"), 10.0)
        yield n
    finally:
        server.kill()
        server.wait()
        n.close()


def reach(n: Network, src: str | None, dst: str) -> bool:
    cmd = [sys.executable, "-c", PROBE, n.ip(dst)]
    out = run(cmd if src is None else [*n.prefix(src), *cmd], check=False).stdout.strip()
    return out == "hi"


def test_hosts_reach_each_other_and_the_root_namespace(net: Network) -> None:
    assert reach(net, "a", "b") and reach(net, "c", "b") and reach(net, None, "b")
    # no route out of a namespace: only the bridge's /24 is reachable
    routes = net.exec("a", ["ip", "route"]).stdout
    assert "default" not in routes and f"198.18.{net.subnet}.0/24" in routes


def test_cut_heal(net: Network) -> None:
    net.cut(["a"], ["b"])
    assert not reach(net, "a", "b")
    assert reach(net, "c", "b") and reach(net, None, "b")   # only a<->b is cut; clients still reach b
    assert any(net.ip("a") in r for r in net.rules()["b"])
    net.heal()
    assert reach(net, "a", "b")
    assert net.rules() == {"a": [], "b": [], "c": []}


def test_bridge_partition_is_not_transitive(net: Network) -> None:
    net.cut(["a"], ["c"])           # b is the bridge: hears both sides
    assert reach(net, "a", "b") and reach(net, "c", "b")
    net.exec("c", ["iptables", "-F", "INPUT"])
    net.partition([["a"], ["b", "c"]])
    assert not reach(net, "a", "b") and reach(net, "c", "b")


def test_slow_link_applies_and_heals(net: Network) -> None:
    how = net.slow(["b"])
    assert how.startswith("netem") == net.netem_available()
    assert net.exec("b", ["tc", "qdisc", "show", "dev", "eth0"]).stdout.split()[1] in ("netem", "tbf")
    net.heal()
    assert "netem" not in net.exec("b", ["tc", "qdisc", "show", "dev", "eth0"]).stdout
    assert "tbf" not in net.exec("b", ["tc", "qdisc", "show", "dev", "eth0"]).stdout


def test_close_removes_everything_and_stale_runs_are_cleaned() -> None:
    n = Network(["x"]).create()
    ns = n.hosts["x"].ns
    sleeper = subprocess.Popen([*n.prefix("x"), "sleep", "300"])
    assert wait_for(lambda: str(sleeper.pid) in run(["ip", "netns", "pids", ns]).stdout.split(), 10.0)
    n.close()
    assert sleeper.wait(10) != 0
    assert ns not in run(["ip", "netns", "list"]).stdout
    # a namespace left by a run whose process is gone (pid 0x7ffffff0 cannot be alive) is removed
    dead = f"{NS_PREFIX}{0x7ffffff0}-n0"
    run(["ip", "netns", "add", dead])
    try:
        leftover = subprocess.Popen(["ip", "netns", "exec", dead, "sleep", "300"])
        assert wait_for(lambda: str(leftover.pid) in run(["ip", "netns", "pids", dead]).stdout.split(), 10.0)
        assert dead in cleanup_stale()
        assert leftover.wait(10) != 0
        import os

        assert dead not in os.listdir(NETNS_DIR)
    finally:
        run(["ip", "netns", "del", dead], check=False)
