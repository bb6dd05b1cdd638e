"""Transactions with the Java client (kafka-clients 3.9.1) against a live broker (issue #4).

The Java program below is compiled once per session (jars from tests/support/jars.py). It only
drives the client and prints what happened; every check is made here, and the committed /
uncommitted views are read both by the Java consumer and by librdkafka.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import jars
from tests.txn.compat_support import (
    FAST_TXN,
    assert_same,
    create_topics,
    ctp_round,
    merge,
    read_all,
    tp_list,
    txn_values,
)

pytestmark = [pytest.mark.slow, pytest.mark.java]

JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]

SOURCE = r"""
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class TxnCompat {
    static final String[] TOPICS = {"txn-t0", "txn-t1", "txn-t2"};

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String tid, int timeoutMs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", tid);
        p.put("linger.ms", "5");
        p.put("transaction.timeout.ms", Integer.toString(timeoutMs));
        KafkaProducer<byte[], byte[]> kp = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
        kp.initTransactions();
        return kp;
    }

    static void txn(KafkaProducer<byte[], byte[]> p, String tag, boolean commit) {
        p.beginTransaction();
        for (String t : TOPICS)
            for (int part = 0; part < 3; part++)
                for (int i = 0; i < 5; i++)
                    p.send(new ProducerRecord<>(t, part, null, (tag + "-" + t + "-" + part + "-" + i).getBytes()));
        if (commit) p.commitTransaction(); else { p.flush(); p.abortTransaction(); }
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String isolation, String group) {
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("isolation.level", isolation);
        c.put("enable.auto.commit", "false");
        c.put("auto.offset.reset", "earliest");
        if (group != null) { c.put("group.id", group); c.put("session.timeout.ms", "6000"); c.put("heartbeat.interval.ms", "1000"); }
        return new KafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    static void read(String bootstrap, String isolation, int expect) {
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, isolation, null)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (String t : TOPICS) for (int p = 0; p < 3; p++) tps.add(new TopicPartition(t, p));
            c.assign(tps);
            c.seekToBeginning(tps);
            int n = 0, idle = 0;
            long deadline = System.currentTimeMillis() + 60000;
            while (System.currentTimeMillis() < deadline && (n < expect || idle < 4)) {
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(500));
                if (rs.isEmpty()) idle++; else idle = 0;
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    System.out.println("R " + isolation + " " + r.topic() + " " + r.partition() + " " + new String(r.value()));
                    n++;
                }
            }
        }
    }

    public static void main(String[] a) throws Exception {
        String mode = a[0], bootstrap = a[1];
        switch (mode) {
            case "commit-abort": {
                try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, "java-3x3", 60000)) {
                    txn(p, "c1", true); txn(p, "a2", false); txn(p, "c3", true);
                }
                read(bootstrap, "read_committed", 90);
                read(bootstrap, "read_uncommitted", 135);
                break;
            }
            case "fence": {
                KafkaProducer<byte[], byte[]> zombie = producer(bootstrap, "java-fence", 60000);
                zombie.beginTransaction();
                zombie.send(new ProducerRecord<>("txn-t0", 0, null, "zombie".getBytes()));
                zombie.flush();
                KafkaProducer<byte[], byte[]> fresh = producer(bootstrap, "java-fence", 60000);
                try {
                    zombie.send(new ProducerRecord<>("txn-t0", 0, null, "zombie-2".getBytes())).get();
                    zombie.commitTransaction();
                    System.out.println("ZOMBIE-COMMITTED");
                } catch (Exception e) {
                    Throwable t = e.getCause() != null && e instanceof java.util.concurrent.ExecutionException ? e.getCause() : e;
                    System.out.println("FENCED " + t.getClass().getName());
                }
                zombie.close(Duration.ofSeconds(1));
                fresh.beginTransaction();
                fresh.send(new ProducerRecord<>("txn-t0", 0, null, "fresh".getBytes()));
                fresh.commitTransaction();
                fresh.close();
                System.out.println("FRESH-COMMITTED");
                break;
            }
            case "timeout": {
                KafkaProducer<byte[], byte[]> p = producer(bootstrap, "java-timeout", 3000);
                p.beginTransaction();
                for (int i = 0; i < 5; i++) p.send(new ProducerRecord<>("txn-t1", 1, null, ("stuck-" + i).getBytes()));
                p.flush();
                Thread.sleep(8000);
                try {
                    p.commitTransaction();
                    System.out.println("STUCK-COMMITTED");
                } catch (Exception e) {
                    System.out.println("ABORTED " + e.getClass().getName());
                }
                p.close(Duration.ofSeconds(1));
                break;
            }
            case "ctp": {
                String in = a[2], out = a[3], group = a[4], tid = a[5];
                long idleExit = (long) (Double.parseDouble(a[6]) * 1000);
                KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, "read_committed", group);
                KafkaProducer<byte[], byte[]> p = producer(bootstrap, tid, 60000);
                c.subscribe(Collections.singletonList(in));
                long last = System.currentTimeMillis();
                int n = 0;
                while (System.currentTimeMillis() - last < idleExit) {
                    ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(500));
                    if (rs.isEmpty()) continue;
                    last = System.currentTimeMillis();
                    p.beginTransaction();
                    for (ConsumerRecord<byte[], byte[]> r : rs) {
                        byte[] v = ("out:" + new String(r.value())).getBytes();
                        p.send(new ProducerRecord<>(out, r.partition(), r.key(), v));
                    }
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (TopicPartition tp : c.assignment()) offsets.put(tp, new OffsetAndMetadata(c.position(tp)));
                    p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                    p.commitTransaction();
                    n += rs.count();
                    System.out.println("committed " + n);
                }
                c.close();
                p.close();
                break;
            }
            case "admin": {
                KafkaProducer<byte[], byte[]> p = producer(bootstrap, "java-admin", 60000);
                p.beginTransaction();
                p.send(new ProducerRecord<>("txn-t0", 0, null, "hanging".getBytes())).get();
                Properties ap = new Properties();
                ap.put("bootstrap.servers", bootstrap);
                try (org.apache.kafka.clients.admin.Admin admin = org.apache.kafka.clients.admin.Admin.create(ap)) {
                    for (org.apache.kafka.clients.admin.TransactionListing l : admin.listTransactions().all().get())
                        System.out.println("LIST " + l.transactionalId() + " " + l.state() + " " + l.producerId());
                    org.apache.kafka.clients.admin.TransactionDescription d =
                        admin.describeTransactions(Collections.singleton("java-admin")).description("java-admin").get();
                    System.out.println("DESC " + d.state() + " " + d.producerId() + " " + d.producerEpoch() + " "
                        + d.transactionTimeoutMs() + " " + d.topicPartitions());
                    TopicPartition tp = new TopicPartition("txn-t0", 0);
                    org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState ps =
                        admin.describeProducers(Collections.singleton(tp)).partitionResult(tp).get();
                    for (org.apache.kafka.clients.admin.ProducerState s : ps.activeProducers())
                        System.out.println("PROD " + s.producerId() + " " + s.producerEpoch() + " " + s.lastSequence()
                            + " " + s.currentTransactionStartOffset().orElse(-1L));
                    admin.abortTransaction(new org.apache.kafka.clients.admin.AbortTransactionSpec(
                        tp, d.producerId(), (short) d.producerEpoch(), 0)).all().get();
                    System.out.println("ABORTED");
                }
                p.close(Duration.ofSeconds(1));
                break;
            }
            default: throw new IllegalArgumentException(mode);
        }
    }
}
"""


@pytest.fixture(scope="session")
def txn_java_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("javac/java not on PATH: install a JDK (Debian: apt-get install openjdk-17-jdk-headless)")
    cp = jars.classpath()
    src_dir = tmp_path_factory.mktemp("txn-java-src")
    (src_dir / "TxnCompat.java").write_text(SOURCE)
    out = tmp_path_factory.mktemp("txn-java-classes")
    proc = subprocess.run(["javac", "-cp", cp, "-d", str(out), str(src_dir / "TxnCompat.java")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"javac failed:\n{proc.stdout}\n{proc.stderr}"
    return os.pathsep.join([str(out), cp])


def java_cmd(cp: str, *args: str) -> list[str]:
    return ["java", *JVM_FLAGS, "-cp", cp, "TxnCompat", *args]


def run_java(cp: str, *args: str, timeout: float = 180) -> list[str]:
    proc = subprocess.run(java_cmd(cp, *args), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"java {args[0]} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc.stdout.splitlines()


def test_commit_and_abort_across_partitions(broker_factory: Any, txn_java_classpath: str) -> None:
    b = broker_factory()
    create_topics(b.bootstrap)
    lines = run_java(txn_java_classpath, "commit-abort", b.bootstrap)
    seen: dict[str, dict[tuple[str, int], list[bytes]]] = {"read_committed": {}, "read_uncommitted": {}}
    for line in lines:
        if line.startswith("R "):
            _, iso, t, p, v = line.split(" ", 4)
            seen[iso].setdefault((t, int(p)), []).append(v.encode())
    t1, t2, t3 = txn_values("c1"), txn_values("a2"), txn_values("c3")
    assert_same(seen["read_committed"], merge(t1, t3), "java read_committed")
    assert_same(seen["read_uncommitted"], merge(t1, t2, t3), "java read_uncommitted")
    assert_same(read_all(b.bootstrap, tp_list(), "read_committed", expect=90), merge(t1, t3), "librdkafka")


def test_second_producer_fences_the_first(broker_factory: Any, txn_java_classpath: str) -> None:
    b = broker_factory()
    create_topics(b.bootstrap)
    lines = run_java(txn_java_classpath, "fence", b.bootstrap)
    fenced = [ln for ln in lines if ln.startswith("FENCED ")]
    assert fenced and "ZOMBIE-COMMITTED" not in lines, lines
    assert fenced[0].split()[1].rsplit(".", 1)[1] in (
        "ProducerFencedException", "InvalidProducerEpochException", "KafkaException"), fenced
    assert "FRESH-COMMITTED" in lines
    assert read_all(b.bootstrap, [("txn-t0", 0)], "read_committed", expect=1) == {("txn-t0", 0): [b"fresh"]}


def test_open_transaction_times_out(broker_factory: Any, txn_java_classpath: str) -> None:
    b = broker_factory(FAST_TXN)
    create_topics(b.bootstrap)
    lines = run_java(txn_java_classpath, "timeout", b.bootstrap)
    assert any(ln.startswith("ABORTED ") for ln in lines) and "STUCK-COMMITTED" not in lines, lines
    assert read_all(b.bootstrap, [("txn-t1", 1)], "read_committed", settle_s=1) == {("txn-t1", 1): []}
    assert len(read_all(b.bootstrap, [("txn-t1", 1)], "read_uncommitted", expect=5)[("txn-t1", 1)]) == 5


def test_consume_transform_produce_survives_sigkill(broker_factory: Any, txn_java_classpath: str,
                                                    tmp_path: Path) -> None:
    b = broker_factory(FAST_TXN)
    ctp_round(b.bootstrap, "java", tmp_path, command=java_cmd(txn_java_classpath, "ctp"))


def test_admin_client_transaction_apis(broker_factory: Any, txn_java_classpath: str) -> None:
    """kafka-transactions.sh's calls: list, describe, describe-producers, abort a hanging transaction."""
    b = broker_factory()
    create_topics(b.bootstrap)
    lines = run_java(txn_java_classpath, "admin", b.bootstrap)
    lists = [ln.split() for ln in lines if ln.startswith("LIST ")]
    assert [(x[1], x[2]) for x in lists] == [("java-admin", "Ongoing")], lines
    pid = lists[0][3]
    desc = next(ln for ln in lines if ln.startswith("DESC ")).split(" ", 5)
    assert desc[1:5] == ["Ongoing", pid, "0", "60000"] and "txn-t0-0" in desc[5], desc
    prod = next(ln for ln in lines if ln.startswith("PROD ")).split()
    assert prod[1:] == [pid, "0", "0", "0"], prod  # last sequence 0, transaction open from offset 0
    assert "ABORTED" in lines
    # the hanging transaction is closed: read_committed can read past it, and sees nothing of it
    assert read_all(b.bootstrap, [("txn-t0", 0)], "read_committed", settle_s=1) == {("txn-t0", 0): []}
    assert read_all(b.bootstrap, [("txn-t0", 0)], "read_uncommitted", expect=1) == {("txn-t0", 0): [b"hanging"]}
