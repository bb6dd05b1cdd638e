"""Every ``samsa`` operator command against a live Samsa broker, run as a user would run it.

Each test starts the real ``samsa`` command line (``python -m broker.cli``) as a
subprocess against a broker subprocess on a free port, and checks what it prints (mostly the
``--json`` form, which is the contract for scripts) and its exit status. Side effects are
checked through a second path where possible: a topic created by ``samsa topics`` is read
back through Metadata by ``samsa topics --describe`` and by kafka-python; offsets reset by
``samsa consumer-groups`` are read back by a KafkaConsumer; ``dump-log`` reads the segment
files the broker wrote.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(180)


def samsa(*args: str, stdin: str | None = None, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "broker.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"samsa {' '.join(args)} exited {proc.returncode}\nstdout:\n{proc.stdout}\n"
                             f"stderr:\n{proc.stderr}")
    return proc


def samsa_json(*args: str, stdin: str | None = None) -> Any:
    return json.loads(samsa(*args, "--json", stdin=stdin).stdout)


def test_topics_lifecycle(broker: Any) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    out = samsa("topics", *b, "--create", "--topic", "orders", "--partitions", "3", "--replication-factor", "1",
                "--config", "retention.ms=3600000", "--config", "cleanup.policy=compact").stdout
    assert "Created topic orders." in out
    # Creating it again fails with Kafka's error, unless --if-not-exists.
    again = samsa("topics", *b, "--create", "--topic", "orders", "--partitions", "1", check=False)
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    samsa("topics", *b, "--create", "--topic", "orders", "--partitions", "1", "--if-not-exists")
    # A bad config value is refused by the broker and nothing is created.
    bad = samsa("topics", *b, "--create", "--topic", "bad", "--config", "retention.ms=soon", check=False)
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr
    assert "bad" not in samsa_json("topics", *b, "--list")

    assert "orders" in samsa_json("topics", *b, "--list")
    assert samsa("topics", *b, "--list", "--topic", "ord.*").stdout.split() == ["orders"]
    [desc] = samsa_json("topics", *b, "--describe", "--topic", "orders")
    assert desc["partition_count"] == 3 and desc["replication_factor"] == 1
    assert [p["partition"] for p in desc["partitions"]] == [0, 1, 2]
    assert all(p["leader"] >= 0 and p["isr"] == p["replicas"] for p in desc["partitions"])
    assert desc["configs"] == {"retention.ms": "3600000", "cleanup.policy": "compact"}
    table = samsa("topics", *b, "--describe", "--topic", "orders").stdout
    assert "PartitionCount: 3" in table and "cleanup.policy=compact" in table
    # The topic id in Kafka's spelling (URL-safe base64, 22 characters) everywhere: the table, the
    # JSON, the broker's log line and the partition.metadata file the broker wrote.
    tid = desc["topic_id"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", tid), tid
    assert f"TopicId: {tid}\t" in table
    assert f"topic_id: {tid}" in (broker.data_dir / "orders-0" / "partition.metadata").read_text()
    assert f"Created topic orders with topic ID {tid}" in broker.log_text()
    with_overrides = samsa_json("topics", *b, "--describe", "--topics-with-overrides")
    # as kafka-topics.sh: the internal topics (compacted) are listed once they exist
    assert [t["topic"] for t in with_overrides if not t["topic"].startswith("__")] == ["orders"]
    with_overrides = samsa_json("topics", *b, "--describe", "--topics-with-overrides", "--exclude-internal")
    assert [t["topic"] for t in with_overrides] == ["orders"]

    # --validate-only creates nothing.
    samsa("topics", *b, "--create", "--topic", "dry", "--partitions", "2", "--validate-only")
    assert "dry" not in samsa_json("topics", *b, "--list")

    # Partitions grow, never shrink.
    samsa("topics", *b, "--alter", "--topic", "orders", "--partitions", "5")
    [desc] = samsa_json("topics", *b, "--describe", "--topic", "orders")
    assert desc["partition_count"] == 5
    shrink = samsa("topics", *b, "--alter", "--topic", "orders", "--partitions", "2", check=False)
    assert shrink.returncode == 1 and "INVALID_PARTITIONS" in shrink.stdout

    out = samsa("topics", *b, "--delete", "--topic", "orders").stdout
    assert "Deleted topic orders." in out
    deadline = time.monotonic() + 10
    while "orders" in samsa_json("topics", *b, "--list") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "orders" not in samsa_json("topics", *b, "--list")
    missing = samsa("topics", *b, "--delete", "--topic", "orders", check=False)
    assert missing.returncode == 1
    samsa("topics", *b, "--delete", "--topic", "orders", "--if-exists")


def test_configs_describe_and_alter(broker: Any) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    samsa("topics", *b, "--create", "--topic", "cfg", "--partitions", "1")
    assert samsa_json("configs", *b, "--describe", "--topic", "cfg")[0]["configs"] == []

    out = samsa("configs", *b, "--alter", "--entity-type", "topics", "--entity-name", "cfg",
                "--add-config", "retention.ms=120000,cleanup.policy=[compact,delete],max.message.bytes=2000").stdout
    assert "Completed updating config for topic 'cfg'." in out
    [res] = samsa_json("configs", *b, "--describe", "--entity-type", "topics", "--entity-name", "cfg")
    got = {c["name"]: (c["value"], c["source"]) for c in res["configs"]}
    assert got == {"retention.ms": ("120000", "DYNAMIC_TOPIC_CONFIG"),
                   "cleanup.policy": ("compact,delete", "DYNAMIC_TOPIC_CONFIG"),
                   "max.message.bytes": ("2000", "DYNAMIC_TOPIC_CONFIG")}

    # --all includes defaults, with their broker synonyms.
    [res] = samsa_json("configs", *b, "--describe", "--topic", "cfg", "--all")
    every = {c["name"]: c for c in res["configs"]}
    assert every["segment.bytes"]["source"] in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")
    assert every["retention.ms"]["value"] == "120000"
    assert any(s["name"] == "log.retention.ms" or s["name"] == "log.retention.hours"
               for s in every["retention.ms"]["synonyms"])

    # The broker validates; the tool reports INVALID_CONFIG with the broker's message and exits 1.
    bad = samsa("configs", *b, "--alter", "--topic", "cfg", "--add-config", "retention.ms=abc", check=False)
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stdout and "retention.ms" in bad.stdout
    bad = samsa("configs", *b, "--alter", "--topic", "cfg", "--add-config", "cleanup.policy=shred", check=False)
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stdout
    bad = samsa("configs", *b, "--alter", "--topic", "cfg", "--add-config", "no.such.config=1", check=False)
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stdout

    # A config change takes effect: max.message.bytes=2000 refuses a 5000-byte record.
    # (keyed: cfg is compacted, and a compacted topic refuses keyless records first)
    big = samsa("console-producer", *b, "--topic", "cfg", "--sync", "--property", "parse.key=true",
                stdin="k\t" + "x" * 5000 + "\n", check=False)
    assert big.returncode == 1 and "MessageSizeTooLarge" in big.stderr.replace("Error", "")

    samsa("configs", *b, "--alter", "--topic", "cfg", "--delete-config", "retention.ms,max.message.bytes")
    [res] = samsa_json("configs", *b, "--describe", "--topic", "cfg")
    assert {c["name"] for c in res["configs"]} == {"cleanup.policy"}
    samsa("console-producer", *b, "--topic", "cfg", "--sync", "--property", "parse.key=true",
          stdin="k\t" + "x" * 5000 + "\n")

    # Broker configs: all of them, and a dynamic default.
    [res] = samsa_json("configs", *b, "--describe", "--broker", "0", "--all")
    names = {c["name"]: c for c in res["configs"]}
    assert "log.retention.hours" in names and "num.partitions" in names
    samsa("configs", *b, "--alter", "--broker-defaults", "--add-config", "log.retention.ms=7200000")
    [res] = samsa_json("configs", *b, "--describe", "--entity-type", "brokers", "--entity-default")
    assert {c["name"]: c["value"] for c in res["configs"]}.get("log.retention.ms") == "7200000"
    [res] = samsa_json("configs", *b, "--describe", "--topic", "cfg", "--all")
    assert {c["name"]: c["value"] for c in res["configs"]}["retention.ms"] == "7200000"


def test_console_producer_and_consumer(broker: Any) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    samsa("topics", *b, "--create", "--topic", "lines", "--partitions", "1")
    lines = "".join(f"h{i}:x,trace:{i}\tkey-{i}\tvalue {i}\n" for i in range(20))
    acks = samsa("console-producer", *b, "--topic", "lines", "--property", "parse.key=true",
                 "--property", "parse.headers=true", "--compression-codec", "zstd", "--json", stdin=lines).stdout
    offsets = [json.loads(line)["offset"] for line in acks.splitlines()]
    assert offsets == list(range(20))
    samsa("console-producer", *b, "--topic", "lines", "--property", "parse.key=true",
          "--property", "null.marker=NULL", stdin="gone\tNULL\n")

    recs = [json.loads(line) for line in samsa("console-consumer", *b, "--topic", "lines", "--from-beginning",
                                                 "--max-messages", "21", "--json").stdout.splitlines()]
    assert [r["offset"] for r in recs] == list(range(21))
    assert recs[3]["key"] == "key-3" and recs[3]["value"] == "value 3"
    assert recs[3]["headers"] == [["h3", "x"], ["trace", "3"]]
    assert recs[20]["key"] == "gone" and recs[20]["value"] is None

    proc = samsa("console-consumer", *b, "--topic", "lines", "--from-beginning", "--max-messages", "2",
                 "--property", "print.key=true", "--property", "print.offset=true",
                 "--property", "print.partition=true", "--property", "print.headers=true")
    assert proc.stdout.splitlines() == ["Partition:0\tOffset:0\th0:x,trace:0\tkey-0\tvalue 0",
                                        "Partition:0\tOffset:1\th1:x,trace:1\tkey-1\tvalue 1"]
    assert "Processed a total of 2 messages" in proc.stderr
    part = samsa("console-consumer", *b, "--topic", "lines", "--partition", "0", "--offset", "18",
                 "--max-messages", "2").stdout
    assert part.splitlines() == ["value 18", "value 19"]
    # Without --from-beginning and nothing new, a timeout ends it with nothing printed.
    proc = samsa("console-consumer", *b, "--topic", "lines", "--timeout-ms", "1500")
    assert proc.stdout == "" and "Processed a total of 0 messages" in proc.stderr


def test_get_offsets(broker: Any) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    samsa("topics", *b, "--create", "--topic", "go", "--partitions", "3")
    before = int(time.time() * 1000)
    samsa("console-producer", *b, "--topic", "go", "--partition", "1", stdin="".join(f"{i}\n" for i in range(7)))
    out = samsa("get-offsets", *b, "--topic", "go").stdout.split()
    assert out == ["go:0:0", "go:1:7", "go:2:0"]
    assert samsa("get-offsets", *b, "--topic", "go", "--time", "earliest", "--partitions", "1").stdout.split() == \
        ["go:1:0"]
    rows = samsa_json("get-offsets", *b, "--topic-partitions", "go:1-", "--time", str(before))
    assert [(r["partition"], r["offset"]) for r in rows] == [(1, 0), (2, None)]
    future = samsa("get-offsets", *b, "--topic", "go", "--partitions", "1", "--time", str(before + 10**9)).stdout
    assert future.split() == ["go:1:"]
    mx = samsa_json("get-offsets", *b, "--topic", "go", "--partitions", "1", "--time", "max-timestamp")
    assert mx[0]["offset"] in range(7)


def _produce(bootstrap: str, topic: str, n: int) -> None:
    samsa("console-producer", "--bootstrap-server", bootstrap, "--topic", topic,
          stdin="".join(f"m{i}\n" for i in range(n)))


def test_consumer_groups(broker: Any) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    samsa("topics", *b, "--create", "--topic", "work", "--partitions", "2")
    _produce(broker.bootstrap, "work", 10)
    # Consume everything as group g1 (the console consumer commits what it printed).
    samsa("console-consumer", *b, "--topic", "work", "--group", "g1", "--from-beginning", "--max-messages", "10")
    assert "g1" in [g["group"] for g in samsa_json("consumer-groups", *b, "--list")]
    [d] = samsa_json("consumer-groups", *b, "--describe", "--group", "g1")
    assert d["state"] == "Empty"
    assert sum(o["current_offset"] for o in d["offsets"]) == 10
    assert all(o["lag"] == 0 for o in d["offsets"])
    table = samsa("consumer-groups", *b, "--describe", "--group", "g1").stdout
    assert "CURRENT-OFFSET" in table and "LOG-END-OFFSET" in table

    # Dry run changes nothing; --execute commits.
    plan = samsa_json("consumer-groups", *b, "--reset-offsets", "--group", "g1", "--topic", "work",
                      "--to-earliest")
    assert not plan["executed"] and all(r["new_offset"] == 0 for r in plan["offsets"])
    [d] = samsa_json("consumer-groups", *b, "--describe", "--group", "g1")
    assert sum(o["current_offset"] for o in d["offsets"]) == 10
    samsa("consumer-groups", *b, "--reset-offsets", "--group", "g1", "--topic", "work", "--to-earliest", "--execute")
    [d] = samsa_json("consumer-groups", *b, "--describe", "--group", "g1")
    assert sum(o["lag"] for o in d["offsets"]) == 10
    # The group consumes again from the reset position.
    again = samsa("console-consumer", *b, "--topic", "work", "--group", "g1", "--max-messages", "10").stdout
    assert sorted(again.split()) == sorted(f"m{i}" for i in range(10))
    # Shift and explicit offsets are clamped to the log's range.
    res = samsa_json("consumer-groups", *b, "--reset-offsets", "--group", "g1", "--all-topics", "--shift-by", "-2",
                     "--execute")
    [d] = samsa_json("consumer-groups", *b, "--describe", "--group", "g1")
    ends = {o["partition"]: o["log_end_offset"] for o in d["offsets"]}
    assert {r["partition"]: r["new_offset"] for r in res["offsets"]} == {p: max(0, e - 2) for p, e in ends.items()}
    res = samsa_json("consumer-groups", *b, "--reset-offsets", "--group", "g1", "--topic", "work:0",
                     "--to-offset", "1000", "--execute")
    assert res["offsets"][0]["new_offset"] == ends[0]
    samsa("consumer-groups", *b, "--reset-offsets", "--group", "g1", "--topic", "work", "--to-datetime",
          "2000-01-01T00:00:00Z", "--execute")
    [d] = samsa_json("consumer-groups", *b, "--describe", "--group", "g1")
    assert all(o["current_offset"] == 0 for o in d["offsets"])

    # A live member blocks --execute; --members shows it.
    live = subprocess.Popen([sys.executable, "-m", "broker.cli", "console-consumer", *b, "--topic", "work",
                             "--group", "g1", "--timeout-ms", "60000"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        members: list[Any] = []
        while time.monotonic() < deadline:
            [d] = samsa_json("consumer-groups", *b, "--describe", "--group", "g1")
            members = d["members"]
            if members and d["state"] == "Stable" and members[0]["partitions"]:
                break
            time.sleep(0.5)
        assert len(members) == 1 and len(members[0]["partitions"]) == 2
        blocked = samsa("consumer-groups", *b, "--reset-offsets", "--group", "g1", "--topic", "work",
                        "--to-latest", "--execute", check=False)
        assert blocked.returncode == 1 and "inactive" in blocked.stderr
        assert "CONSUMER-ID" in samsa("consumer-groups", *b, "--describe", "--group", "g1", "--members").stdout
        busy = samsa("consumer-groups", *b, "--delete", "--group", "g1", check=False)
        assert busy.returncode == 1 and "NON_EMPTY_GROUP" in busy.stdout.upper().replace("NONEMPTYGROUP",
                                                                                          "NON_EMPTY_GROUP")
    finally:
        live.kill()
        live.wait()

    # Once the member has gone (session timeout or leave), the group can be deleted.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if samsa_json("consumer-groups", *b, "--describe", "--group", "g1")[0]["state"] == "Empty":
            break
        time.sleep(1)
    assert "was successful" in samsa("consumer-groups", *b, "--delete", "--group", "g1").stdout
    assert "g1" not in [g["group"] for g in samsa_json("consumer-groups", *b, "--list")]


def test_dump_log(broker: Any, tmp_path: Path) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    samsa("topics", *b, "--create", "--topic", "dl", "--partitions", "1", "--config", "segment.bytes=600",
          "--config", "index.interval.bytes=100")
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        # --sync: one record per batch, so no batch outgrows segment.bytes=600 (that is RECORD_LIST_TOO_LARGE)
        samsa("console-producer", *b, "--topic", "dl", "--property", "parse.key=true", "--compression-codec", codec,
              "--sync", stdin="".join(f"k{i}\t{codec}-{i}-{'p' * 40}\n" for i in range(10)))
    pdir = Path(broker.data_dir) / "dl-0"
    deadline = time.monotonic() + 10
    while not pdir.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    docs = samsa_json("dump-log", "--files", str(pdir), "--print-data-log", "--index-sanity-check")
    logs = [d for d in docs if d["type"] == "log"]
    assert len(logs) >= 3, "segment.bytes=600 should have rolled segments"
    batches = [bt for d in logs for bt in d["batches"]]
    assert {bt["compresscodec"] for bt in batches} == {"none", "gzip", "snappy", "lz4", "zstd"}
    records = [r for bt in batches for r in bt["records"]]
    assert [r["offset"] for r in records] == list(range(50))
    assert records[12]["key"] == "k2" and records[12]["payload"].startswith("gzip-2-")
    assert all(bt["isvalid"] for bt in batches) and all(bt["producerId"] >= 0 for bt in batches)
    assert not [p for d in docs for p in d["problems"]]
    assert any(d["type"] == "index" and d["entries"] for d in docs)

    text = samsa("dump-log", "--files", str(pdir / "00000000000000000000.log"), "--deep-iteration").stdout
    assert text.startswith(f"Dumping {pdir / '00000000000000000000.log'}\nLog starting offset: 0\n")
    assert "baseOffset: 0 lastOffset: " in text and "count: " in text and "| offset: 0 CreateTime:" in text
    assert "payload:" not in text

    # A flipped byte is reported as an invalid batch and the exit status says so.
    bad = tmp_path / "00000000000000000000.log"
    shutil.copy(pdir / "00000000000000000000.log", bad)
    data = bytearray(bad.read_bytes())
    data[100] ^= 0xFF
    bad.write_bytes(bytes(data))
    proc = samsa("dump-log", "--files", str(bad), check=False)
    assert proc.returncode == 1 and "isvalid: false" in proc.stdout
