"""Consumer groups with the Java client, kafka-clients 3.9.1 (issue #3, (a)-(e)).

The worker below is compiled with ``javac`` once per session against the jars of
tests/support/jars.py and speaks the same line protocol as the Python workers of
test_groups_support.py (``ASSIGN``, ``MSG``, ``COMMITTED``/``COMMITFAIL``, ``CLOSED`` after
``close`` on stdin), so the same scenarios check it. The Java client is the reference for the
four assignors: range, roundrobin, sticky and cooperative-sticky (KIP-429), and for static
membership (KIP-345, which it does not leave the group for on close).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from compat_tests import test_groups_support as support
from compat_tests.test_groups_support import (
    Group,
    create_topic,
    produce,
    scenario_assignor,
    scenario_cooperative_join,
    scenario_fetch_sessions,
    scenario_resume_after_broker_restart,
    scenario_static_member_restart,
    scenario_three_consumers_then_close_and_kill,
    unique,
    wait_balanced,
    wait_consumed,
)
from tests.support import jars

pytestmark = [pytest.mark.java]
CLIENT = "java"
JVM_FLAGS = ["-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]

ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "sticky": "org.apache.kafka.clients.consumer.StickyAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}

SOURCE = r"""
import java.io.*;
import java.time.Duration;
import java.util.*;
import java.util.stream.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.serialization.StringDeserializer;

public class GroupWorker {
    static void emit(String s) { System.out.println(s); System.out.flush(); }

    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], group = a[1], topic = a[2], assignor = a[3], instance = a[4], clientId = a[5];
        int delayMs = Integer.parseInt(a[6]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", clientId);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("session.timeout.ms", "6000");
        p.put("heartbeat.interval.ms", "1000");
        p.put("partition.assignment.strategy", assignor);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        if (!instance.isEmpty()) p.put("group.instance.id", instance);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(Collections.singletonList(topic));
            String last = null;
            while (true) {
                if (System.in.available() > 0) {
                    String cmd = in.readLine();
                    if (cmd == null || cmd.trim().equals("close")) {
                        c.close();
                        emit("CLOSED");
                        return;
                    }
                }
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                String cur = c.assignment().stream().sorted(Comparator.comparing(TopicPartition::topic)
                        .thenComparingInt(TopicPartition::partition))
                        .map(tp -> tp.topic() + ":" + tp.partition()).collect(Collectors.joining(","));
                if (!cur.equals(last)) { emit("ASSIGN " + cur); last = cur; }
                for (ConsumerRecord<String, String> r : recs) {
                    emit("MSG " + r.partition() + " " + r.offset() + " " + r.value());
                    if (delayMs > 0) Thread.sleep(delayMs);
                    try {
                        c.commitSync(Collections.singletonMap(new TopicPartition(r.topic(), r.partition()),
                                new OffsetAndMetadata(r.offset() + 1)));
                        emit("COMMITTED " + r.partition() + " " + r.offset());
                    } catch (KafkaException e) {
                        emit("COMMITFAIL " + r.partition() + " " + r.offset());
                    }
                }
            }
        }
    }
}
"""


ADMIN_SOURCE = r"""
import java.util.*;
import java.util.stream.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.*;

// What kafka-consumer-groups.sh does, through the AdminClient: list, describe, list offsets,
// alter (reset) offsets, delete offsets, delete the group. Prints one line per finding.
public class GroupAdmin {
    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], group = a[1], topic = a[2];
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            for (ConsumerGroupListing g : admin.listConsumerGroups().all().get())
                System.out.println("LISTED " + g.groupId() + " " + g.state().map(Object::toString).orElse("?"));
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            System.out.println("STATE " + d.state() + " " + d.partitionAssignor() + " " + d.members().size());
            for (MemberDescription m : d.members())
                System.out.println("MEMBER " + m.clientId() + " " + m.assignment().topicPartitions().stream()
                        .map(tp -> Integer.toString(tp.partition())).sorted().collect(Collectors.joining(",")));
            Map<TopicPartition, OffsetAndMetadata> offs =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            for (var e : new TreeMap<String, Long>(offs.entrySet().stream().collect(Collectors.toMap(
                    e -> e.getKey().toString(), e -> e.getValue().offset()))).entrySet())
                System.out.println("OFFSET " + e.getKey() + " " + e.getValue());
            if (a.length > 3 && a[3].equals("mutate")) {
                admin.alterConsumerGroupOffsets(group, Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(1)))
                        .all().get();
                admin.deleteConsumerGroupOffsets(group, Set.of(new TopicPartition(topic, 1))).all().get();
                offs = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                for (var e : offs.entrySet())
                    System.out.println("AFTER " + e.getKey() + " " + e.getValue().offset());
                admin.deleteConsumerGroups(List.of(group)).all().get();
                System.out.println("DELETED " + admin.listConsumerGroups().all().get().stream()
                        .noneMatch(g -> g.groupId().equals(group)));
            }
        }
    }
}
"""

_CLASSPATH: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def java_worker(tmp_path_factory: pytest.TempPathFactory):
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("javac/java not on PATH")
    cp = jars.classpath()
    d: Path = tmp_path_factory.mktemp("group-worker")
    (d / "GroupWorker.java").write_text(SOURCE)
    (d / "GroupAdmin.java").write_text(ADMIN_SOURCE)
    r = subprocess.run(["javac", "-cp", cp, "-d", str(d), str(d / "GroupWorker.java"), str(d / "GroupAdmin.java")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    classpath = os.pathsep.join([str(d), cp])
    _CLASSPATH[:] = [classpath]

    def argv(bootstrap: str, group: str, topic: str, assignor: str, instance: str, client_id: str,
             delay_ms: int) -> list[str]:
        return ["java", *JVM_FLAGS, "-cp", classpath, "GroupWorker", bootstrap, group, topic,
                ASSIGNORS[assignor], instance, client_id, str(delay_ms)]

    support.EXTERNAL_WORKERS[CLIENT] = argv
    yield
    support.EXTERNAL_WORKERS.pop(CLIENT, None)


@pytest.mark.slow
def test_three_consumers_then_close_and_kill(broker) -> None:
    scenario_three_consumers_then_close_and_kill(broker.bootstrap, CLIENT)


@pytest.mark.slow
def test_resume_after_broker_restart(broker) -> None:
    scenario_resume_after_broker_restart(broker, CLIENT)


@pytest.mark.parametrize("assignor", list(ASSIGNORS))
def test_assignor(broker, assignor: str) -> None:
    scenario_assignor(broker.bootstrap, CLIENT, assignor)


def test_cooperative_incremental_join(broker) -> None:
    scenario_cooperative_join(broker.bootstrap, CLIENT)


def test_static_member_restart(broker) -> None:
    scenario_static_member_restart(broker.bootstrap, CLIENT)


@pytest.mark.slow
def test_mixed_with_java(broker) -> None:
    """(f) with the Java client too: Java, kafka-python and confluent-kafka in one group."""
    scenario_three_consumers_then_close_and_kill(broker.bootstrap, ["java", "kafka-python", "confluent-kafka"])


def _group_admin(bootstrap: str, group: str, topic: str, *extra: str) -> list[str]:
    r = subprocess.run(["java", *JVM_FLAGS, "-cp", _CLASSPATH[0], "GroupAdmin", bootstrap, group, topic, *extra],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"GroupAdmin failed:\n{r.stdout}\n{r.stderr[-3000:]}"
    return r.stdout.splitlines()


def test_admin_client_groups(broker) -> None:
    """The Java AdminClient (what kafka-consumer-groups.sh uses) lists and describes a live group
    with its members and assignment, lists its offsets, resets and deletes offsets, deletes it."""
    bootstrap = broker.bootstrap
    topic, group = unique("grp-jadm"), unique("jadm")
    create_topic(bootstrap, topic)
    values = produce(bootstrap, topic, "j", 3)
    with Group(bootstrap, topic, group) as g:
        w = g.start(CLIENT, name="java-admin-member")
        wait_balanced([w])
        wait_consumed([w], values)
        w.wait_for(lambda x: len(x.committed()) == len(values), what="commits")
        out = _group_admin(bootstrap, group, topic)
        assert f"LISTED {group} Stable" in out, out
        assert "STATE Stable range 1" in out and "MEMBER java-admin-member 0,1,2,3,4,5" in out, out
        assert sorted(x for x in out if x.startswith("OFFSET")) == sorted(f"OFFSET {topic}-{p} 3" for p in range(6))
        w.close()
    out = _group_admin(bootstrap, group, topic, "mutate")
    after = sorted(x for x in out if x.startswith("AFTER"))
    assert after == sorted([f"AFTER {topic}-0 1"] + [f"AFTER {topic}-{p} 3" for p in range(2, 6)]), out
    assert "DELETED true" in out



def test_consumer_uses_incremental_fetch_sessions(broker_factory) -> None:
    scenario_fetch_sessions(broker_factory, CLIENT)
