"""The Java AdminClient (kafka-clients 3.9.1) against a live broker, cross-checked with samsa.

A small Java program (source below, compiled once per session against the jars from
tests/support/jars.py) creates, describes, alters and deletes topics, partitions, records
and configs and prints one line per result; the assertions are here. What Java changed is
then read back with the ``samsa`` CLI (and the other way round), so the tools agree.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.support.java import JVM_FLAGS, compile_java

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]


SOURCE = r"""
import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class AdminCompat {
    static void out(String s) { System.out.println(s); System.out.flush(); }
    static String err(Exception e) { Throwable c = e.getCause() == null ? e : e.getCause(); return c.getClass().getSimpleName(); }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            out("cluster " + admin.describeCluster().nodes().get().size() + " " + admin.describeCluster().controller().get().id());
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1)
                .configs(Map.of("retention.ms", "3600000", "cleanup.policy", "compact")))).all().get();
            out("created");
            try {
                admin.createTopics(List.of(new NewTopic(topic + "-bad", 1, (short) 1).configs(Map.of("segment.bytes", "10")))).all().get();
                out("bad-create ok");
            } catch (ExecutionException e) { out("bad-create " + err(e)); }
            try {
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            } catch (ExecutionException e) { out("dup-create " + err(e)); }
            out("list " + String.join(",", new TreeSet<>(admin.listTopics().names().get())));
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            out("partitions " + d.partitions().size() + " leader " + d.partitions().get(0).leader().id());

            ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config c = admin.describeConfigs(List.of(r), new DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true)).all().get().get(r);
            for (String n : List.of("retention.ms", "cleanup.policy", "segment.bytes")) {
                ConfigEntry e = c.get(n);
                out("config " + n + " " + e.value() + " " + e.source() + " " + e.type() + " " + e.synonyms().size()
                    + " " + (e.documentation() != null && !e.documentation().isEmpty()));
            }
            admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("max.message.bytes", "3000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("retention.ms", null), AlterConfigOp.OpType.DELETE),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.APPEND)))).all().get();
            try {
                admin.incrementalAlterConfigs(Map.of(r, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "abc"), AlterConfigOp.OpType.SET)))).all().get();
                out("bad-alter ok");
            } catch (ExecutionException e) { out("bad-alter " + err(e) + " " + e.getCause().getMessage()); }
            c = admin.describeConfigs(List.of(r)).all().get().get(r);
            out("after " + c.get("max.message.bytes").value() + " " + c.get("retention.ms").value() + " "
                + c.get("retention.ms").source() + " " + c.get("cleanup.policy").value());

            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();
            try {
                admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(1))).all().get();
                out("shrink ok");
            } catch (ExecutionException e) { out("shrink " + err(e)); }
            out("partitions " + admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size());

            Properties pp = new Properties();
            pp.put("bootstrap.servers", bootstrap);
            pp.put("key.serializer", ByteArraySerializer.class.getName());
            pp.put("value.serializer", ByteArraySerializer.class.getName());
            try (KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(pp)) {
                for (int i = 0; i < 10; i++) prod.send(new ProducerRecord<>(topic, 2, ("k" + i).getBytes(), new byte[100])).get();
                try {
                    prod.send(new ProducerRecord<>(topic, 2, "big".getBytes(), new byte[5000])).get();
                    out("big ok");
                } catch (ExecutionException e) { out("big " + err(e)); }
            }
            TopicPartition tp = new TopicPartition(topic, 2);
            long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(tp).get().lowWatermark();
            out("deleted-records " + low);
            long earliest = admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).all().get().get(tp).offset();
            long latest = admin.listOffsets(Map.of(tp, OffsetSpec.latest())).all().get().get(tp).offset();
            out("offsets " + earliest + " " + latest);

            Map<Integer, Map<String, LogDirDescription>> dirs = admin.describeLogDirs(List.of(0)).allDescriptions().get();
            for (Map.Entry<String, LogDirDescription> e : dirs.get(0).entrySet()) {
                ReplicaInfo ri = e.getValue().replicaInfos().get(tp);
                out("logdir " + (ri != null ? ri.size() : -1) + " " + e.getValue().totalBytes().isPresent());
            }
            try {
                admin.electLeaders(ElectionType.PREFERRED, Set.of(new TopicPartition(topic, 0))).all().get();
                out("elect ok");
            } catch (ExecutionException e) { out("elect " + err(e)); }

            ConfigResource br = new ConfigResource(ConfigResource.Type.BROKER, "0");
            Config bc = admin.describeConfigs(List.of(br)).all().get().get(br);
            out("broker " + bc.get("log.retention.hours").value() + " " + bc.get("log.dirs").isReadOnly());
            admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.BROKER, ""), List.of(
                new AlterConfigOp(new ConfigEntry("log.cleaner.delete.retention.ms", "5000"), AlterConfigOp.OpType.SET)))).all().get();
            if (args.length > 2 && args[2].equals("delete")) {
                admin.deleteTopics(List.of(topic)).all().get();
                out("deleted");
            }
        }
    }
}
"""


@pytest.fixture(scope="session")
def admin_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_java(SOURCE, "AdminCompat", tmp_path_factory.mktemp("admin-java"))


def samsa_json(*args: str) -> Any:
    proc = subprocess.run([sys.executable, "-m", "broker.cli", *args, "--json"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_java_admin_client(broker: Any, admin_classpath: str) -> None:
    proc = subprocess.run(["java", *JVM_FLAGS, "-cp", admin_classpath, "AdminCompat", broker.bootstrap, "jadmin"],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-3000:]}"
    lines = proc.stdout.splitlines()

    def line(prefix: str) -> list[str]:
        found = [ln.split()[1:] for ln in lines if ln.split()[0] == prefix]
        assert found, f"no '{prefix}' line in:\n{proc.stdout}"
        return found[-1]

    assert line("cluster") == ["1", "0"]
    assert line("bad-create") == ["InvalidConfigurationException"]
    assert line("dup-create") == ["TopicExistsException"]
    assert "jadmin" in line("list")[0].split(",")
    configs = {ln.split()[1]: ln.split()[2:] for ln in lines if ln.startswith("config ")}
    assert configs["retention.ms"][:3] == ["3600000", "DYNAMIC_TOPIC_CONFIG", "LONG"]
    assert configs["cleanup.policy"][:3] == ["compact", "DYNAMIC_TOPIC_CONFIG", "LIST"]
    assert configs["segment.bytes"][:3] == ["1073741824", "DEFAULT_CONFIG", "INT"]
    assert int(configs["retention.ms"][3]) >= 2 and configs["retention.ms"][4] == "true"
    bad = line("bad-alter")
    assert bad[0] == "InvalidConfigurationException" and "retention.ms" in " ".join(bad)
    assert line("after") == ["3000", "604800000", "DEFAULT_CONFIG", "compact,delete"]
    assert line("shrink") == ["InvalidPartitionsException"]
    assert line("partitions") == ["3"]
    assert line("big")[0] == "RecordTooLargeException"  # max.message.bytes=3000 set above applies
    assert line("deleted-records") == ["4"]
    assert line("offsets") == ["4", "10"]
    size, has_total = line("logdir")
    assert int(size) > 1000 and has_total == "true"
    assert line("elect")[0] in ("ok", "ElectionNotNeededException")
    assert line("broker") == ["168", "true"]

    # What Java did, seen by samsa; then samsa alters and deletes, and Java's view follows.
    [desc] = samsa_json("topics", "--bootstrap-server", broker.bootstrap, "--describe", "--topic", "jadmin")
    assert desc["partition_count"] == 3
    assert desc["configs"] == {"max.message.bytes": "3000", "cleanup.policy": "compact,delete"}
    [cfg] = samsa_json("configs", "--bootstrap-server", broker.bootstrap, "--describe", "--broker-defaults")
    assert {c["name"]: c["value"] for c in cfg["configs"]} == {"log.cleaner.delete.retention.ms": "5000"}
    [tcfg] = samsa_json("configs", "--bootstrap-server", broker.bootstrap, "--describe", "--topic", "jadmin", "--all")
    dr = {c["name"]: c for c in tcfg["configs"]}["delete.retention.ms"]
    assert dr["value"] == "5000" and dr["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    offs = samsa_json("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", "jadmin", "--partitions", "2",
                      "--time", "earliest")
    assert offs[0]["offset"] == 4

    proc = subprocess.run(["java", *JVM_FLAGS, "-cp", admin_classpath, "AdminCompat", broker.bootstrap, "jadmin2",
                           "delete"], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0 and "deleted" in proc.stdout.split(), proc.stderr[-3000:]
    assert "jadmin2" not in samsa_json("topics", "--bootstrap-server", broker.bootstrap, "--list")

