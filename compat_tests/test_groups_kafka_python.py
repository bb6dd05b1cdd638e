"""Consumer groups with kafka-python 3.x against a live broker (issue #3, (a)-(e)).

Each consumer is a subprocess running kafka-python's ``KafkaConsumer`` (see
test_groups_support.py for the worker and the scenarios). Also: the ``kafka-python admin``
command line lists and describes groups with members, assignments and lag, resets and deletes
offsets, and deletes groups.
"""

from __future__ import annotations

import json
import subprocess

import pytest

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

CLIENT = "kafka-python"


@pytest.mark.slow
def test_three_consumers_then_close_and_kill(broker) -> None:
    scenario_three_consumers_then_close_and_kill(broker.bootstrap, CLIENT)


@pytest.mark.slow
def test_resume_after_broker_restart(broker) -> None:
    scenario_resume_after_broker_restart(broker, CLIENT)


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_assignor(broker, assignor: str) -> None:
    scenario_assignor(broker.bootstrap, CLIENT, assignor)


def test_cooperative_incremental_join(broker) -> None:
    scenario_cooperative_join(broker.bootstrap, CLIENT)


def test_static_member_restart(broker) -> None:
    scenario_static_member_restart(broker.bootstrap, CLIENT)


def _admin(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["kafka-python", "admin", "-b", bootstrap, "--format", "json", *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"kafka-python admin {' '.join(args)} failed:\n{r.stdout}\n{r.stderr}"
    return r


def test_admin_cli_groups(broker) -> None:
    bootstrap = broker.bootstrap
    topic, group = unique("grp-cli"), unique("cli")
    create_topic(bootstrap, topic)
    values = produce(bootstrap, topic, "c", 4)
    with Group(bootstrap, topic, group) as g:
        w = g.start(CLIENT)
        wait_balanced([w])
        wait_consumed([w], values)
        w.wait_for(lambda x: len(x.committed()) == len(values), what="commits")
        listed = json.loads(_admin(bootstrap, "groups", "list").stdout)
        assert any(x["group_id"] == group and x["group_state"] == "Stable" for x in listed), listed
        described = json.loads(_admin(bootstrap, "groups", "describe", "-g", group).stdout)[group]
        assert described["group_state"] == "Stable" and described["protocol_type"] == "consumer"
        (member,) = described["members"]
        assert member["client_id"] == w.name
        assignment = json.dumps(member["member_assignment"])
        assert topic in assignment
        w.close()
    produce(bootstrap, topic, "lag", 1)  # one more message per partition: lag 1
    offsets = json.loads(_admin(bootstrap, "groups", "list-offsets", "-g", group).stdout)
    parts = offsets[topic] if topic in offsets else offsets[group][topic]
    assert {int(p): (o["offset"], o["lag"]) for p, o in parts.items()} == {p: (4, 1) for p in range(6)}
    # reset to the earliest offset, then delete offsets of partition 0, then the whole group
    # explicit -p scopes: without them kafka-python 3.0.12's CLI mis-reads its own multi-group
    # list_group_offsets result ("too many values to unpack")
    scope = [arg for p in range(6) for arg in ("-p", f"{topic}:{p}")]
    _admin(bootstrap, "groups", "reset-offsets", "-g", group, "-s", "earliest", *scope)
    offsets = json.loads(_admin(bootstrap, "groups", "list-offsets", "-g", group).stdout)
    parts = offsets[topic] if topic in offsets else offsets[group][topic]
    assert {int(p): o["offset"] for p, o in parts.items()} == {p: 0 for p in range(6)}
    _admin(bootstrap, "groups", "delete-offsets", "-g", group, "-p", f"{topic}:0")
    offsets = json.loads(_admin(bootstrap, "groups", "list-offsets", "-g", group).stdout)
    parts = offsets[topic] if topic in offsets else offsets[group][topic]
    assert sorted(int(p) for p in parts) == [1, 2, 3, 4, 5]
    _admin(bootstrap, "groups", "delete", "-g", group)
    listed = json.loads(_admin(bootstrap, "groups", "list").stdout)
    assert all(x["group_id"] != group for x in listed)


def test_consumer_uses_incremental_fetch_sessions(broker_factory) -> None:
    scenario_fetch_sessions(broker_factory, CLIENT)
