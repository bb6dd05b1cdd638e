"""Several log directories (JBOD, issue 14 item 5), with kafka-python's and the Java AdminClient.

* ``log.dirs`` with three directories: new partitions go to the directory with the fewest
  partitions; DescribeLogDirs reports each directory and what it holds.
* AlterReplicaLogDirs (key 34) moves a partition to another directory while a producer keeps
  writing to it: a ``-future`` copy catches up, then takes over; nothing is lost or
  duplicated, and the partition is in its new directory after a restart. Bad paths get
  LOG_DIR_NOT_FOUND, unknown partitions REPLICA_NOT_AVAILABLE.
* A directory that fails takes only its own partitions offline (KAFKA_STORAGE_ERROR,
  offline replicas in Metadata); the other directory keeps serving and takes new topics.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import LogDirNotFoundError, NoError, ReplicaNotAvailableError

from tests.support.java import compile_java, run_java
from tests.support.rawclient import RawClient, build_batch

pytestmark = pytest.mark.timeout(300)
KAFKA_STORAGE_ERROR = 56


def _dirs(tmp_path: Path, n: int) -> list[Path]:
    return [tmp_path / f"disk{i}" for i in range(n)]


def _layout(admin: KafkaAdminClient, topic: str) -> dict[str, dict[int, dict[str, Any]]]:
    """{log dir: {partition: partition entry}} for ``topic`` from DescribeLogDirs."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for r in _log_dirs(admin):
        out.setdefault(r["log_dir"], {})
        assert r["error_code"] == 0, r
        for t in r["topics"]:
            if t["name"] == topic:
                for p in t["partitions"]:
                    out[r["log_dir"]][p["partition_index"]] = {"size": p["partition_size"], "lag": p["offset_lag"],
                                                               "future": p["is_future_key"]}
    return out


def _log_dirs(admin: KafkaAdminClient) -> list[dict[str, Any]]:
    (resp,) = admin.describe_log_dirs()
    assert resp["broker"] == 0
    return list(resp["log_dirs"])


def _where(admin: KafkaAdminClient, topic: str, partition: int) -> list[str]:
    return [d for d, ps in _layout(admin, topic).items() if partition in ps and not ps[partition]["future"]]


def _wait(cond, what: str, timeout: float = 60):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_placement_describe_and_move_while_producing(broker_factory, tmp_path: Path) -> None:
    dirs = _dirs(tmp_path, 3)
    broker = broker_factory({"log.dirs": ",".join(map(str, dirs)), "log.segment.bytes": "65536"})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic("spread", 6, 1)])
        layout = _layout(admin, "spread")
        assert sorted(layout) == sorted(map(str, dirs))
        assert sorted(len(ps) for ps in layout.values()) == [2, 2, 2], layout  # fewest partitions first

        (src,) = _where(admin, "spread", 0)
        dest = next(str(d) for d in dirs if str(d) != src)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
        for i in range(3000):  # ~1.5 MB over many segments before the move
            producer.send("spread", value=b"%06d" % i + b"x" * 500, partition=0)
        producer.flush()
        acked = [3000]
        errors: list[BaseException] = []
        stop = threading.Event()

        def keep_producing() -> None:
            i = 3000
            while not stop.is_set():
                try:
                    producer.send("spread", value=b"%06d" % i + b"x" * 500, partition=0).get(timeout=30)
                except BaseException as e:  # noqa: BLE001 - reported below
                    errors.append(e)
                    return
                i += 1
                acked[0] = i

        t = threading.Thread(target=keep_producing, daemon=True)
        t.start()
        _wait(lambda: acked[0] > 3050, "the producer to run")
        result = admin.alter_replica_log_dirs({("spread", 0, 0): dest})
        assert list(result.values()) == [NoError], result
        _wait(lambda: _where(admin, "spread", 0) == [dest], "spread-0 to move")
        moved_at = acked[0]
        _wait(lambda: acked[0] > moved_at + 50, "produce to go on after the swap")
        stop.set()
        t.join(30)
        assert not errors, errors
        producer.close()
        assert not list(Path(src).glob("spread-0*")) or _wait(
            lambda: not list(Path(src).glob("spread-0*")), "the old copy to go", timeout=30)
        assert not list(Path(dest).glob("*-future"))

        # every acknowledged record is there once, in order
        def consume_all() -> list[bytes]:
            c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
            tp = TopicPartition("spread", 0)
            c.assign([tp])
            c.seek_to_beginning(tp)
            end = c.end_offsets([tp])[tp]
            got: list[bytes] = []
            deadline = time.monotonic() + 60
            while c.position(tp) < end and time.monotonic() < deadline:
                for recs in c.poll(timeout_ms=500).values():
                    got.extend(r.value for r in recs)
            c.close()
            return got

        values = consume_all()
        assert len(values) == acked[0]
        assert [int(v[:6]) for v in values] == list(range(acked[0]))

        # Kafka's errors
        bad = admin.alter_replica_log_dirs({("spread", 1, 0): str(tmp_path / "not-a-log-dir"),
                                            ("spread", 99, 0): dest})
        assert bad[("spread", 1, 0)] is LogDirNotFoundError or \
            bad[next(k for k in bad if k[1] == 1)] is LogDirNotFoundError, bad
        assert bad[next(k for k in bad if k[1] == 99)] is ReplicaNotAvailableError, bad
        # moving to where it already is: nothing to do
        assert list(admin.alter_replica_log_dirs({("spread", 0, 0): dest}).values()) == [NoError]
    finally:
        admin.close()

    broker.restart()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert _where(admin, "spread", 0) == [dest]
    finally:
        admin.close()
    assert len(values) == acked[0]
    assert "Traceback" not in broker.log_text()


def test_failed_log_dir_takes_only_its_partitions_offline(broker_factory, tmp_path: Path) -> None:
    good, bad = _dirs(tmp_path, 2)
    broker = broker_factory({"log.dirs": f"{good},{bad}"})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic("fail", 4, 1)])
        layout = _layout(admin, "fail")
    finally:
        admin.close()
    in_bad = sorted(layout[str(bad)])
    in_good = sorted(layout[str(good)])
    assert len(in_bad) == 2 and len(in_good) == 2
    host, port = broker.bootstrap.split(":")
    with RawClient(host, int(port)) as raw:
        for p in range(4):
            assert raw.produce("fail", p, build_batch([(b"k", b"before", [])])) == (0, 0)
    broker.stop()
    shutil.rmtree(bad)
    bad.write_text("this disk is gone\n")  # the directory cannot be opened any more
    broker.start()

    with RawClient(host, int(port)) as raw:
        for p in in_good:
            assert raw.produce("fail", p, build_batch([(b"k", b"after", [])])) == (0, 1)
            code, hw, recs = raw.fetch("fail", p, 0)
            assert code == 0 and [r.value for r in recs] == [b"before", b"after"]
        for p in in_bad:
            assert raw.produce("fail", p, build_batch([(b"k", b"after", [])]))[0] == KAFKA_STORAGE_ERROR
            assert raw.fetch("fail", p, 0)[0] == KAFKA_STORAGE_ERROR
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        codes = {r["log_dir"]: r["error_code"] for r in _log_dirs(admin)}
        assert codes == {str(good): 0, str(bad): KAFKA_STORAGE_ERROR}
        (desc,) = admin.describe_topics(["fail"])
        offline = {p["partition_index"]: p for p in desc["partitions"]}
        for p in in_bad:
            assert offline[p]["leader_id"] == -1 and offline[p]["offline_replicas"] == [0], offline[p]
        for p in in_good:
            assert offline[p]["leader_id"] == 0 and offline[p]["offline_replicas"] == []
        admin.create_topics([NewTopic("fresh", 3, 1)])  # new partitions only on the live dir
        assert sorted(_layout_ok(admin, "fresh", str(good))) == [0, 1, 2]
    finally:
        admin.close()
    assert "is offline" in broker.log_text()


def _layout_ok(admin: KafkaAdminClient, topic: str, log_dir: str) -> list[int]:
    return [p["partition_index"] for r in _log_dirs(admin) if r["log_dir"] == log_dir for t in r["topics"]
            if t["name"] == topic for p in t["partitions"]]


JAVA_SOURCE = r"""
import java.util.*;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.*;

public class JbodCompat {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        String topic = args[1], dest = args[2];
        try (Admin admin = Admin.create(p)) {
            admin.createTopics(List.of(new NewTopic(topic, 4, (short) 1))).all().get();
            Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(0)).allDescriptions().get().get(0);
            for (Map.Entry<String, LogDirDescription> e : new TreeMap<>(dirs).entrySet()) {
                long n = e.getValue().replicaInfos().keySet().stream().filter(tp -> tp.topic().equals(topic)).count();
                System.out.println("dir " + e.getKey() + " " + n + " " + (e.getValue().error() == null));
            }
            TopicPartitionReplica r = new TopicPartitionReplica(topic, 0, 0);
            admin.alterReplicaLogDirs(Map.of(r, dest)).all().get();
            for (int i = 0; i < 300; i++) {
                DescribeReplicaLogDirsResult.ReplicaLogDirInfo info =
                    admin.describeReplicaLogDirs(List.of(r)).all().get().get(r);
                if (dest.equals(info.getCurrentReplicaLogDir()) && info.getFutureReplicaLogDir() == null) {
                    System.out.println("moved " + info.getCurrentReplicaLogDir());
                    break;
                }
                Thread.sleep(100);
            }
            try {
                admin.alterReplicaLogDirs(Map.of(new TopicPartitionReplica(topic, 1, 0), "/no/such/dir")).all().get();
                System.out.println("bad-dir ok");
            } catch (ExecutionException e) {
                System.out.println("bad-dir " + e.getCause().getClass().getSimpleName());
            }
        }
    }
}
"""


@pytest.mark.java
def test_java_admin_client_log_dirs(broker_factory, tmp_path: Path,
                                    tmp_path_factory: pytest.TempPathFactory) -> None:
    cp = compile_java(JAVA_SOURCE, "JbodCompat", tmp_path_factory.mktemp("jbod-java"))
    dirs = _dirs(tmp_path, 2)
    broker = broker_factory({"log.dirs": ",".join(map(str, dirs))})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic("filler", 1, 1)])  # disk0 holds one partition more than disk1
        (src,) = _where(admin, "filler", 0)
    finally:
        admin.close()
    lines = run_java(cp, "JbodCompat", broker.bootstrap, "jtopic", src)
    dir_lines = sorted(ln for ln in lines if ln.startswith("dir "))
    assert dir_lines == sorted([f"dir {dirs[0]} 1 true", f"dir {dirs[1]} 3 true"]) or \
        dir_lines == sorted([f"dir {dirs[0]} 2 true", f"dir {dirs[1]} 2 true"]), lines
    assert f"moved {src}" in lines, lines
    assert "bad-dir LogDirNotFoundException" in lines, lines


def test_reassign_partitions_log_dirs(broker_factory, tmp_path: Path) -> None:
    """samsa reassign-partitions with Kafka's log_dirs: --execute moves, --verify reports."""
    import json  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    dirs = _dirs(tmp_path, 2)
    broker = broker_factory({"log.dirs": ",".join(map(str, dirs))})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic("rp", 2, 1)])
        (src,) = _where(admin, "rp", 0)
        dest = next(str(d) for d in dirs if str(d) != src)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "rp", "partition": 0, "replicas": [0], "log_dirs": [dest]},
            {"topic": "rp", "partition": 1, "replicas": [0], "log_dirs": ["any"]}]}))

        def samsa(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "broker.cli", "reassign-partitions", "--bootstrap-server",
                                   broker.bootstrap, *args], capture_output=True, text=True, timeout=120)

        ex = samsa("--execute", "--reassignment-json-file", str(plan))
        assert ex.returncode == 0, ex.stderr
        _wait(lambda: _where(admin, "rp", 0) == [dest], "rp-0 to move")
        ver = samsa("--verify", "--reassignment-json-file", str(plan))
        assert ver.returncode == 0, ver.stderr
        assert "Reassignment of replica rp-0-0 completed successfully." in ver.stdout
    finally:
        admin.close()


def test_io_error_at_run_time_takes_the_dir_offline(broker_factory, tmp_path: Path) -> None:
    """An I/O error while the broker runs (here: the next segment's file name is taken by a
    directory, so the roll cannot create it) takes that log dir offline, not the broker."""
    dirs = _dirs(tmp_path, 2)
    broker = broker_factory({"log.dirs": ",".join(map(str, dirs))})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic("rt", 2, 1, topic_configs={"segment.bytes": "300"})])
        (failing,) = _where(admin, "rt", 0)
        (healthy,) = _where(admin, "rt", 1)
        assert failing != healthy
    finally:
        admin.close()
    host, port = broker.bootstrap.split(":")
    with RawClient(host, int(port)) as raw:
        assert raw.produce("rt", 0, build_batch([(b"k", b"v" * 100, [])]))[0] == 0
        for n in range(1, 60):
            (Path(failing) / "rt-0" / f"{n:020d}.log").mkdir()
        codes = []
        for _ in range(20):
            code, _offset = raw.produce("rt", 0, build_batch([(b"k", b"v" * 100, [])]))
            codes.append(code)
            if code:
                break
        assert codes[-1] == KAFKA_STORAGE_ERROR and set(codes[:-1]) <= {0}, codes
        assert raw.produce("rt", 0, build_batch([(b"k", b"v", [])]))[0] == KAFKA_STORAGE_ERROR
        assert raw.fetch("rt", 0, 0)[0] == KAFKA_STORAGE_ERROR
        assert raw.produce("rt", 1, build_batch([(b"k", b"v", [])])) == (0, 0)  # the other dir serves
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        codes_by_dir = {r["log_dir"]: r["error_code"] for r in _log_dirs(admin)}
        assert codes_by_dir == {failing: KAFKA_STORAGE_ERROR, healthy: 0}
    finally:
        admin.close()
    assert broker.is_running() and "is offline" in broker.log_text()
