"""``samsa reassign-partitions``, ``samsa leader-election`` and ``samsa topics --describe`` filters.

Run as a user runs them (``python -m broker.cli ...`` subprocesses) against a real broker. A
single broker is the only replica of everything, so an election is never needed and the only
reassignment possible keeps replicas where they are; the tests check the tools' parsing,
validation, Kafka's output wording and exit statuses, and that a broker without
AlterPartitionReassignments / ListPartitionReassignments (keys 45/46) gets a clear error.
``assign_replicas`` is checked against the placement table in Kafka's ``AdminUtils``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from broker.tools.reassign_partitions import assign_replicas
from tests.support.net import api_versions_v0

pytestmark = pytest.mark.timeout(240)


def samsa(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True, timeout=90)
    if check and proc.returncode != 0:
        raise AssertionError(f"samsa {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def _write(path: Path, doc: Any) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


def test_assign_replicas_matches_kafkas_placement_table() -> None:
    # AdminUtils' example: 5 brokers, 10 partitions, RF 3, start index 0, no initial shift.
    got = assign_replicas([0, 1, 2, 3, 4], 10, 3, start_index=0, shift=0)
    assert got[0] == [0, 1, 2] and got[4] == [4, 0, 1]
    assert got[5] == [0, 2, 3] and got[9] == [4, 1, 2]
    for brokers, n, rf in (([0, 1, 2], 7, 3), ([3, 5, 7, 9], 12, 2), ([1], 4, 1)):
        a = assign_replicas(brokers, n, rf)
        assert sorted(a) == list(range(n))
        assert all(len(set(r)) == rf and set(r) <= set(brokers) for r in a.values())
        leaders = [r[0] for r in a.values()]
        assert max(leaders.count(b) for b in brokers) - min(leaders.count(b) for b in brokers) <= 1


def test_leader_election(broker: Any, tmp_path: Path) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    samsa("topics", *b, "--create", "--topic", "elect", "--partitions", "3")
    one = samsa("leader-election", *b, "--election-type", "preferred", "--topic", "elect", "--partition", "0")
    assert one.stdout.strip() == "Valid replica already elected for partitions elect-0"
    unclean = samsa("leader-election", *b, "--election-type", "UNCLEAN", "--topic", "elect", "--partition", "1",
                    "--json")
    assert json.loads(unclean.stdout) == [{"topic": "elect", "partition": 1, "result": "not_needed",
                                           "error": "ELECTION_NOT_NEEDED",
                                           "message": "Leader election not needed for topic partition."}]
    # All partitions: the controller leaves out those that need no election, as Kafka's does.
    every = samsa("leader-election", *b, "--election-type", "PREFERRED", "--all-topic-partitions")
    assert "No partitions needed a leader election (PREFERRED)." in every.stdout
    plan = _write(tmp_path / "e.json", {"partitions": [{"topic": "elect", "partition": 0},
                                                       {"topic": "elect", "partition": 2},
                                                       {"topic": "elect", "partition": 9}]})
    mixed = samsa("leader-election", *b, "--election-type", "preferred", "--path-to-json-file", plan, check=False)
    assert mixed.returncode == 1
    assert "Valid replica already elected for partitions elect-0, elect-2" in mixed.stdout
    assert ("Error completing leader election (PREFERRED) for partition: elect-9: UNKNOWN_TOPIC_OR_PARTITION"
            in mixed.stdout)
    assert mixed.stderr.strip() == "Error: 1 replica(s) could not be elected"
    # Bad input: clear messages, exit 1 (or argparse's 2), no traceback.
    dup = _write(tmp_path / "d.json", {"partitions": [{"topic": "elect", "partition": 0}] * 2})
    r = samsa("leader-election", *b, "--election-type", "preferred", "--path-to-json-file", dup, check=False)
    assert r.returncode == 1 and "duplicate partitions: elect-0" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = samsa("leader-election", *b, "--election-type", "preferred", "--path-to-json-file", str(bad), check=False)
    assert r.returncode == 1 and "is not valid JSON" in r.stderr
    r = samsa("leader-election", *b, "--election-type", "preferred", "--topic", "elect", check=False)
    assert r.returncode == 1 and "--topic needs --partition" in r.stderr
    r = samsa("leader-election", *b, "--election-type", "sideways", "--all-topic-partitions", check=False)
    assert r.returncode == 2 and "invalid choice" in r.stderr
    assert "Traceback" not in r.stderr


def test_reassign_partitions(broker: Any, tmp_path: Path) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    samsa("topics", *b, "--create", "--topic", "moving", "--partitions", "3")
    [desc] = json.loads(samsa("topics", *b, "--describe", "--topic", "moving", "--json").stdout)
    me = desc["partitions"][0]["leader"]
    topics = _write(tmp_path / "topics.json", {"version": 1, "topics": [{"topic": "moving"}]})

    gen = samsa("reassign-partitions", *b, "--generate", "--topics-to-move-json-file", topics,
                "--broker-list", str(me))
    lines = gen.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment" and lines[3] == \
        "Proposed partition reassignment configuration"
    current, proposed = json.loads(lines[1]), json.loads(lines[4])
    expected = {"version": 1, "partitions": [{"topic": "moving", "partition": p, "replicas": [me],
                                              "log_dirs": ["any"]} for p in range(3)]}
    assert current == expected and proposed == expected
    r = samsa("reassign-partitions", *b, "--generate", "--topics-to-move-json-file", topics,
              "--broker-list", f"{me},{me + 7}", check=False)
    assert r.returncode == 1 and f"unknown broker id(s) in --broker-list: [{me + 7}]" in r.stderr

    # Verify a plan equal to the current assignment: complete, whatever the broker serves.
    plan = _write(tmp_path / "plan.json", proposed)
    ver = samsa("reassign-partitions", *b, "--verify", "--reassignment-json-file", plan)
    assert ver.stdout.splitlines() == ["Status of partition reassignment:"] + [
        f"Reassignment of partition moving-{p} is completed." for p in range(3)]

    # Execute: keys 45/46 are the controller's; a broker without them gets a clear error.
    served = api_versions_v0(broker.host, broker.port)
    ex = samsa("reassign-partitions", *b, "--execute", "--reassignment-json-file", plan, check=False)
    listed = samsa("reassign-partitions", *b, "--list", check=False)
    if 45 not in served:
        assert ex.returncode == 1 and "Traceback" not in ex.stderr
        # --execute first asks ListPartitionReassignments whether others run (key 46), then key 45.
        assert "does not support ListPartitionReassignments (API key 46)" in ex.stderr
        assert "partition reassignment needs a cluster whose controller serves it" in ex.stderr
        added = samsa("reassign-partitions", *b, "--execute", "--additional", "--reassignment-json-file", plan,
                      check=False)
        assert added.returncode == 1 and "does not support AlterPartitionReassignments (API key 45)" in added.stderr
        assert listed.returncode == 1 and "does not support ListPartitionReassignments (API key 46)" in listed.stderr
    else:
        assert ex.returncode == 0, ex.stderr
        assert "Successfully started partition reassignment(s) for moving-0,moving-1,moving-2" in ex.stdout
        assert listed.returncode == 0

    # Plans are checked before anything is sent.
    cases = [
        ({"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [me + 9]}]},
         f"names broker(s) [{me + 9}], which are not in the cluster"),
        ({"version": 1, "partitions": [{"topic": "moving", "partition": 7, "replicas": [me]}]},
         "partition(s) not found: moving-7"),
        ({"version": 1, "partitions": [{"topic": "nope", "partition": 0, "replicas": [me]}]},
         "topic(s) not found: nope"),
        ({"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [me, me]}]},
         "lists a replica twice"),
        ({"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [me],
                                        "log_dirs": ["/data", "any"]}]}, "log_dirs must have one entry per replica"),
        ({"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [me],
                                        "log_dirs": ["/data"]}]}, "LogDirNotFoundError"),
        ({"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": []}]}, "empty replica list"),
        ({"version": 1, "partitions": []}, "the reassignment JSON must hold"),
        ({"version": 2, "partitions": [{"topic": "moving", "partition": 0, "replicas": [me]}]},
         "unsupported reassignment JSON version 2"),
    ]
    for i, (doc, message) in enumerate(cases):
        path = _write(tmp_path / f"bad{i}.json", doc)
        r = samsa("reassign-partitions", *b, "--execute", "--reassignment-json-file", path, check=False)
        assert r.returncode == 1 and message in r.stderr and "Traceback" not in r.stderr, (doc, r.stderr)
    r = samsa("reassign-partitions", *b, "--execute", check=False)
    assert r.returncode == 1 and "this action needs --reassignment-json-file" in r.stderr


def test_topics_describe_partition_filters(broker: Any) -> None:
    b = ("--bootstrap-server", broker.bootstrap)
    samsa("topics", *b, "--create", "--topic", "healthy", "--partitions", "2")
    for flag in ("--under-replicated-partitions", "--unavailable-partitions"):
        doc = json.loads(samsa("topics", *b, "--describe", flag, "--json").stdout)
        assert doc and all(t["partitions"] == [] for t in doc)
        assert samsa("topics", *b, "--describe", flag).stdout.strip() == ""
    # min.insync.replicas: the broker default (1) for "healthy"; 2 for "strict", which one replica cannot meet.
    samsa("topics", *b, "--create", "--topic", "strict", "--partitions", "1", "--config", "min.insync.replicas=2")
    mine = ("--topic", "healthy|strict", "--json")
    at = json.loads(samsa("topics", *b, "--describe", "--at-min-isr-partitions", *mine).stdout)
    assert {t["topic"]: [p["partition"] for p in t["partitions"]] for t in at} == {"healthy": [0, 1], "strict": []}
    under = json.loads(samsa("topics", *b, "--describe", "--under-min-isr-partitions", *mine).stdout)
    assert {t["topic"]: [p["partition"] for p in t["partitions"]] for t in under} == {"healthy": [], "strict": [0]}
    text = samsa("topics", *b, "--describe", "--under-min-isr-partitions").stdout
    assert "Topic: strict" in text and "Topic: healthy" not in text
