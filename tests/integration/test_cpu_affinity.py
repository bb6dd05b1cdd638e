"""``cpu.affinity``: the broker process, and every thread it starts, runs on the CPUs it names
(broker/cpu_affinity.py); a list it cannot use stops the broker at startup with the reason.

Real broker processes, their affinity read back from the kernel (/proc/<pid>/task/*/status).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer

from broker.cpu_affinity import parse_cpu_list
from tests.support.brokers import REPO_ROOT, SamsaBroker, thread_cpus


def test_a_broker_and_all_its_threads_run_on_the_cpus_of_cpu_affinity(tmp_path: Path) -> None:
    cpu = max(os.sched_getaffinity(0))  # one CPU this test may use
    broker = SamsaBroker(tmp_path / "data", tmp_path / "broker.log", overrides={"cpu.affinity": str(cpu)})
    broker.start(timeout=60)
    try:
        assert broker.proc is not None
        # it serves: a record goes in and comes out
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        producer.send("pinned", b"v").get(timeout=30)
        producer.close()
        consumer = KafkaConsumer("pinned", bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                 consumer_timeout_ms=20000)
        assert [m.value for m in consumer][:1] == [b"v"]
        consumer.close()
        threads = thread_cpus(broker.proc.pid)  # (a broker in a cluster has ZooKeeper's threads
        assert threads and all(cpus == {cpu} for cpus in threads.values()), threads  # too: test_cluster_cli)
        assert f"Running on CPUs {cpu} of" in broker.log_path.read_text()
    finally:
        broker.stop()


@pytest.mark.parametrize(("value", "reason"), [
    ("1-x", "is not a CPU number or a range"),
    ("3-1", "is not a CPU number or a range"),
    ("0,", "empty item"),
    ("0-4000000000", "goes beyond CPU 65535"),
    ("4096", "names none of the CPUs this process may run on"),
])
def test_a_cpu_affinity_the_broker_cannot_use_stops_it_with_the_reason(tmp_path: Path, value: str,
                                                                       reason: str) -> None:
    r = subprocess.run([sys.executable, "-m", "broker", "--override", f"log.dirs={tmp_path}",
                        "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"cpu.affinity={value}"],
                       capture_output=True, text=True, timeout=60, cwd=str(REPO_ROOT))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "invalid configuration: cpu.affinity" in r.stderr and reason in r.stderr, r.stderr


def test_cpu_lists_read_as_taskset_writes_them() -> None:
    assert parse_cpu_list("1") == {1}
    assert parse_cpu_list("0-2,5") == {0, 1, 2, 5}
    assert parse_cpu_list(" 1 , 3-4") == {1, 3, 4}
    for bad in ("", "a", "-1", "2-"):
        with pytest.raises(ValueError):
            parse_cpu_list(bad)
