"""KIP-848 consumer groups (``group.protocol=consumer``) with stock clients against a live broker.

librdkafka (confluent-kafka 2.16) and the Java client (kafka-clients 3.9.1) run the new
protocol: ConsumerGroupHeartbeat, with the broker computing the assignment (``uniform`` or
``range``) and moving partitions incrementally. Each consumer is a subprocess speaking the line
protocol of test_groups_support.py. The broker runs with a 6 s consumer session timeout
(``group.consumer.session.timeout.ms`` and its lower bound lowered) so that killed members are
noticed quickly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compat_tests import test_groups_support as support
from compat_tests.test_groups_support import (
    PARTITIONS,
    Group,
    all_values,
    create_topic,
    produce,
    scenario_resume_after_broker_restart,
    scenario_three_consumers_then_close_and_kill,
    unique,
    wait_balanced,
    wait_consumed,
)
from tests.support import jars

CLIENT = "confluent-kafka-consumer-protocol"
JAVA = "java-consumer-protocol"
OVERRIDES = {
    "group.consumer.session.timeout.ms": 6000,
    "group.consumer.min.session.timeout.ms": 6000,
    "group.consumer.heartbeat.interval.ms": 1000,
    "group.consumer.min.heartbeat.interval.ms": 1000,
}
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def kip848_broker(broker_factory):
    return broker_factory(OVERRIDES)


def describe(bootstrap: str, group: str) -> object:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(30)


@pytest.mark.slow
def test_three_consumers_then_close_and_kill(kip848_broker) -> None:
    """Members join one by one, each message is read once; one closes (leaves with epoch -1),
    one is SIGKILLed (fenced after the session timeout): the survivor takes everything over
    from the committed offsets."""
    scenario_three_consumers_then_close_and_kill(kip848_broker.bootstrap, CLIENT)


@pytest.mark.slow
def test_resume_after_broker_restart(kip848_broker) -> None:
    """A member heartbeating across a broker restart keeps its epoch and partitions (the group
    is rebuilt by replaying its records); committed offsets survive."""
    scenario_resume_after_broker_restart(kip848_broker, CLIENT)


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_server_assignor_and_describe(kip848_broker, assignor: str) -> None:
    bootstrap = kip848_broker.bootstrap
    topic, group = unique(f"cg-{assignor}"), unique("cg")
    create_topic(bootstrap, topic)
    with Group(bootstrap, topic, group) as g:
        ws = [g.start(CLIENT, assignor=assignor) for _ in range(3)]
        wait_balanced(ws)
        values = produce(bootstrap, topic, "a", 4)
        wait_consumed(ws, values)
        counts = all_values(ws)
        assert set(counts) == set(values) and max(counts.values()) == 1
        if assignor == "range":
            # Range hands out contiguous ranges in member-id order.
            assert sorted(sorted(w.assignment) for w in ws) == [[0, 1], [2, 3], [4, 5]]
        d = describe(bootstrap, group)
        assert str(d.state).endswith("STABLE") and d.partition_assignor == assignor
        assert str(getattr(d, "type", "CONSUMER")).endswith("CONSUMER")
        assert sorted(m.client_id for m in d.members) == sorted(w.name for w in ws)
        parts = sorted(tp.partition for m in d.members for tp in m.assignment.topic_partitions)
        assert parts == list(range(PARTITIONS))
        # samsa consumer-groups --describe shows the consumer group (ConsumerGroupDescribe).
        out = subprocess.run([sys.executable, "-m", "broker.cli", "consumer-groups", "--bootstrap-server",
                              bootstrap, "--describe", "--group", group, "--state"],
                             capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        assert "consumer" in out.stdout and assignor in out.stdout and "Stable" in out.stdout, out.stdout
        out = subprocess.run([sys.executable, "-m", "broker.cli", "consumer-groups", "--bootstrap-server",
                              bootstrap, "--describe", "--group", group, "--members"],
                             capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert out.returncode == 0 and all(w.name in out.stdout for w in ws), out.stdout + out.stderr
        for kind, listed in (("", True), ("consumer", True), ("classic", False)):
            out = subprocess.run([sys.executable, "-m", "broker.cli", "consumer-groups", "--bootstrap-server",
                                  bootstrap, "--list", "--type", *([kind] if kind else [])],
                                 capture_output=True, text=True, timeout=60, cwd=ROOT)
            rows = [line.split() for line in out.stdout.splitlines()]
            assert out.returncode == 0 and ([group, "consumer"] in rows) == listed, (kind, out.stdout)
        for w in ws:
            w.close()


@pytest.mark.parametrize("client", [CLIENT, pytest.param(JAVA, marks=pytest.mark.java)])
def test_static_member_rejoins_without_rebalance(kip848_broker, request, client: str) -> None:
    """A static member that closes (epoch -2) and comes back with the same group.instance.id
    gets its partitions back at once; the other member's assignment never changes."""
    if client == JAVA:
        request.getfixturevalue("java_consumer_protocol")
    bootstrap = kip848_broker.bootstrap
    topic, group = unique("cg-static"), unique("cg")
    create_topic(bootstrap, topic)
    with Group(bootstrap, topic, group) as g:
        a = g.start(client, instance="static-a")
        b = g.start(client, instance="static-b")
        wait_balanced([a, b])
        b_before, a_history = b.assignment, a.assignments()
        b.close()
        b2 = g.start(client, instance="static-b", name="static-b-again")
        b2.wait_for(lambda w: bool(w.assignment), what="assignment after rejoin")
        assert b2.assignment == b_before
        values = produce(bootstrap, topic, "s", 2)
        wait_consumed([a, b2], values)
        assert a.assignments() == a_history, "the other member saw a rebalance"
        d = describe(bootstrap, group)
        assert sorted(m.group_instance_id for m in d.members) == ["static-a", "static-b"]


def test_regex_subscription(kip848_broker) -> None:
    """A regex subscription (sent as SubscribedTopicRegex) covers every matching topic, including
    one created while the group runs."""
    bootstrap = kip848_broker.bootstrap
    prefix = unique("rx")
    create_topic(bootstrap, f"{prefix}-a", 2)
    create_topic(bootstrap, f"{prefix}-b", 2)
    create_topic(bootstrap, unique("other"), 2)
    with Group(bootstrap, f"^{prefix}-.*", unique("cg")) as g:
        w = g.start(CLIENT)
        values = produce(bootstrap, f"{prefix}-a", "a", 2, 2) + produce(bootstrap, f"{prefix}-b", "b", 2, 2)
        wait_consumed([w], values)
        create_topic(bootstrap, f"{prefix}-c", 2)
        later = produce(bootstrap, f"{prefix}-c", "c", 2, 2)
        wait_consumed([w], later)
        assert set(all_values([w])) == set(values) | set(later)


# --- the Java client ------------------------------------------------------------------------------

def _java_worker_source() -> str:
    """test_groups_java's worker, configured for the consumer protocol (the Java client refuses
    the classic session/heartbeat/assignor settings with it)."""
    from compat_tests.test_groups_java import SOURCE

    src = SOURCE.replace("public class GroupWorker", "public class GroupWorker848")
    for line in ('        p.put("session.timeout.ms", "6000");\n',
                 '        p.put("heartbeat.interval.ms", "1000");\n',
                 '        p.put("partition.assignment.strategy", assignor);\n'):
        assert line in src
        src = src.replace(line, "")
    return src.replace('        p.put("group.id", group);\n',
                       '        p.put("group.id", group);\n        p.put("group.protocol", "consumer");\n'
                       '        if (!assignor.isEmpty()) p.put("group.remote.assignor", assignor);\n')


@pytest.fixture(scope="module")
def java_consumer_protocol(tmp_path_factory: pytest.TempPathFactory):
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("javac/java not on PATH")
    from compat_tests.test_groups_java import JVM_FLAGS

    cp = jars.classpath()
    d: Path = tmp_path_factory.mktemp("group-worker-848")
    (d / "GroupWorker848.java").write_text(_java_worker_source())
    r = subprocess.run(["javac", "-cp", cp, "-d", str(d), str(d / "GroupWorker848.java")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    classpath = os.pathsep.join([str(d), cp])

    def argv(bootstrap: str, group: str, topic: str, assignor: str, instance: str, client_id: str,
             delay_ms: int) -> list[str]:
        return ["java", *JVM_FLAGS, "-cp", classpath, "GroupWorker848", bootstrap, group, topic,
                assignor if assignor in ("uniform", "range") else "", instance, client_id, str(delay_ms)]

    support.EXTERNAL_WORKERS[JAVA] = argv
    yield
    support.EXTERNAL_WORKERS.pop(JAVA, None)


@pytest.mark.java
def test_java_and_librdkafka_in_one_consumer_group(kip848_broker, java_consumer_protocol) -> None:
    """Two Java consumers and one librdkafka consumer on the consumer protocol share six
    partitions two each and read a known set of messages exactly once; when a Java member
    closes, the others take its partitions over from the committed offsets."""
    bootstrap = kip848_broker.bootstrap
    topic, group = unique("cg-java"), unique("cg")
    create_topic(bootstrap, topic)
    with Group(bootstrap, topic, group) as g:
        ws = [g.start(JAVA, assignor="uniform"), g.start(JAVA, assignor="uniform"),
              g.start(CLIENT, assignor="uniform")]
        try:
            wait_balanced(ws, timeout=120)
        except AssertionError as e:
            raise AssertionError(f"{e}\ncoordinator: {_coordinator_view(bootstrap, group)}") from None
        first = produce(bootstrap, topic, "j1", 5)
        wait_consumed(ws, first)
        counts = all_values(ws)
        assert set(counts) == set(first) and max(counts.values()) == 1
        for w in ws:
            assert {p for p, _, _ in w.messages()} <= w.assignment
            w.wait_for(lambda x: len(x.committed()) == len(x.messages()), what="commits")
        leaving, rest = ws[0], ws[1:]
        leaving.close()
        wait_balanced(rest)
        second = produce(bootstrap, topic, "j2", 5)
        wait_consumed(rest, second)
        counts = all_values(ws)
        assert set(counts) == set(first) | set(second) and max(counts.values()) == 1
        d = describe(bootstrap, group)
        assert sorted(m.client_id for m in d.members) == sorted(w.name for w in rest)


def _coordinator_view(bootstrap: str, group: str) -> str:
    """The coordinator's side of a stuck rebalance (ConsumerGroupDescribe): each member's current
    and target partitions."""
    try:
        d = describe(bootstrap, group)
    except Exception as e:  # diagnostics only
        return f"(describe failed: {e})"

    def ps(a: object) -> list[int]:
        return sorted(tp.partition for tp in getattr(a, "topic_partitions", None) or [])
    return f"state {d.state}: " + "; ".join(
        f"{m.client_id}: assigned {ps(m.assignment)} target {ps(getattr(m, 'target_assignment', None))}"
        for m in d.members)


def test_librdkafka_member_loses_its_revocation_response(broker_factory) -> None:
    """The failed full-suite run, made deterministic: librdkafka member L owns all six
    partitions; two more members join; the heartbeat response telling L to revoke is lost (a
    proxy drops it; L sees its heartbeat time out). librdkafka sends no full request after a
    timed-out heartbeat, only plain ones with null owned partitions, so the coordinator must
    tell it again -- else L keeps all six and the others stay empty until L's rebalance timeout
    (max.poll.interval.ms, 300 s)."""
    from compat_tests.heartbeat_proxy import HeartbeatProxy

    proxy = HeartbeatProxy("lossy")
    try:
        broker = broker_factory({**OVERRIDES,
                                 "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
        proxy.start(broker.port)
        bootstrap = f"127.0.0.1:{proxy.port}"
        topic, group = unique("cg-lossy"), unique("cg")
        create_topic(bootstrap, topic)
        with Group(bootstrap, topic, group) as g:
            lossy = g.start(CLIENT, assignor="uniform", name="lossy")
            lossy.wait_for(lambda w: w.assignment == set(range(6)), what="all six partitions")
            ws = [lossy, g.start(CLIENT, assignor="uniform"), g.start(CLIENT, assignor="uniform")]
            try:
                wait_balanced(ws, timeout=60)
            except AssertionError as e:
                raise AssertionError(f"{e}\ncoordinator: {_coordinator_view(bootstrap, group)}\n"
                                     f"lossy's heartbeat responses: {proxy.events}") from None
            assert len(proxy.dropped) == 1, proxy.events  # the scenario really happened
            first = produce(bootstrap, topic, "l1", 5)
            wait_consumed(ws, first)
            counts = all_values(ws)
            assert set(counts) == set(first) and max(counts.values()) == 1
    finally:
        proxy.close()


def test_online_migration_classic_and_consumer_members(kip848_broker) -> None:
    """KIP-848 online migration with stock clients: two kafka-python consumers (classic
    protocol) form a group; a librdkafka consumer with group.protocol=consumer joins it (the
    group is upgraded, the classic members stay and are assigned by the coordinator); when it
    leaves, the group is classic again and the two take everything back. Every message is read,
    and a message is read twice only if its first reader had not committed it."""
    bootstrap = kip848_broker.bootstrap
    topic, group = unique("cg-mig"), unique("cg")
    create_topic(bootstrap, topic)
    with Group(bootstrap, topic, group) as g:
        classic = [g.start("kafka-python"), g.start("kafka-python")]
        wait_balanced(classic)
        first = produce(bootstrap, topic, "m1", 3)
        wait_consumed(classic, first)
        modern = g.start(CLIENT)
        ws = [*classic, modern]
        wait_balanced(ws, timeout=120)
        assert str(describe(bootstrap, group).state).endswith("STABLE")
        second = produce(bootstrap, topic, "m2", 3)
        wait_consumed(ws, second)
        modern.close()
        wait_balanced(classic, timeout=120)
        third = produce(bootstrap, topic, "m3", 3)
        wait_consumed(classic, third)
        counts = all_values(ws)
        assert set(counts) == set(first) | set(second) | set(third)
        dups = {v for v, n in counts.items() if n > 1}
        assert dups <= set().union(*(w.uncommitted_values() for w in ws)), dups
        from compat_tests.test_groups_support import describe_group
        d = describe_group(bootstrap, group)
        assert d["group_state"] == "Stable" and len(d["members"]) == 2, d
