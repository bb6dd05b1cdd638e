"""Dynamic group configs (Kafka 4.x GROUP config resource, KIP-848/932) against a real broker.

confluent-kafka's AdminClient alters and describes them (``ResourceType.GROUP``); a
confluent ``ShareConsumer`` shows they apply: a fresh group given
``share.auto.offset.reset=earliest`` reads records produced before it joined (the broker's
default is latest), and a group's short ``share.record.lock.duration.ms`` redelivers an
unacknowledged record while the broker-wide lock is a minute. Bad values answer INVALID_CONFIG
with Kafka's messages; ``samsa configs --entity-type groups`` alters and describes them; they
survive a broker restart. (The Java client of tests/support, 3.9.1, has no
``ConfigResource.Type.GROUP``: it arrived with Kafka 4.0's client.)

One broker serves the module (each test has its own topic and group).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from tests.share.test_share_consumer import poll_until, produce, topic_with, values
from tests.support.brokers import BrokerProcess, make_broker
from tests.tools.test_cli import samsa, samsa_json

# Broker-wide: latest (Kafka's default) and a one-minute lock; groups may go down to 1 s.
CONFIG = {"group.share.record.lock.duration.ms": 60000, "group.share.min.record.lock.duration.ms": 1000,
          "offsets.topic.num.partitions": 1, "share.coordinator.state.topic.num.partitions": 1}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = make_broker(tmp_path_factory.mktemp("groupcfg"), overrides=CONFIG, name="groupcfg")
    b.start()
    try:
        yield b
    finally:
        b.kill()


def alter(b: BrokerProcess, group: str, **configs: str | None) -> None:
    """IncrementalAlterConfigs on the GROUP resource: SET each value, DELETE each None."""
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET if v is not None
                           else AlterConfigOpType.DELETE) for k, v in configs.items()]
    r = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})  # kept: a collected client fails its futures
    admin.incremental_alter_configs([r])[r].result(30)


def describe(b: BrokerProcess, group: str) -> dict[str, Any]:
    r = ConfigResource(ResourceType.GROUP, group)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    return admin.describe_configs([r])[r].result(30)  # type: ignore[no-any-return]


def share_consumer(b: BrokerProcess, group: str, topic: str, **conf: Any) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": b.bootstrap, "group.id": group, **conf})
    c.subscribe([topic])
    return c


def test_earliest_group_config_reads_records_produced_before_joining(broker: BrokerProcess) -> None:
    sent = [f"old{i}".encode() for i in range(20)]
    t = topic_with(broker, sent)
    g_latest, g_earliest = f"latest-{uuid.uuid4().hex[:6]}", f"earliest-{uuid.uuid4().hex[:6]}"
    alter(broker, g_earliest, share_auto_offset_reset="earliest")
    described = describe(broker, g_earliest)
    assert described["share.auto.offset.reset"].value == "earliest"
    assert int(described["share.auto.offset.reset"].source) == 8  # DYNAMIC_GROUP_CONFIG
    assert described["share.record.lock.duration.ms"].value == "60000"  # the broker's, not set on the group
    c_latest = share_consumer(broker, g_latest, t)
    c = share_consumer(broker, g_earliest, t)
    try:
        got = poll_until(c, 20)
        assert sorted(values(got)) == sorted(sent)
        # The group without the config starts at the end: only what is produced after it joined.
        assert values(poll_until(c_latest, 1, timeout=4)) == []
        produce(broker, t, [b"new"])
        assert values(poll_until(c_latest, 1)) == [b"new"]
    finally:
        c.close()
        c_latest.close()


def test_group_record_lock_duration_applies(broker: BrokerProcess) -> None:
    t = topic_with(broker, [b"x"])
    g = f"lock-{uuid.uuid4().hex[:6]}"
    alter(broker, g, share_auto_offset_reset="earliest", share_record_lock_duration_ms="1000")
    holder = share_consumer(broker, g, t, **{"share.acknowledgement.mode": "explicit"})
    other = None
    try:
        assert values(poll_until(holder, 1)) == [b"x"]  # acquired, never acknowledged
        t0 = time.monotonic()
        other = share_consumer(broker, g, t)
        again = poll_until(other, 1, timeout=20)
        # Redelivered after the group's 1 s lock; the broker-wide 60 s lock would not within 20 s.
        assert values(again) == [b"x"] and again[0].delivery_count() == 2, time.monotonic() - t0
    finally:
        holder.close()
        if other is not None:
            other.close()


@pytest.mark.parametrize("name,value,message", [
    ("share.record.lock.duration.ms", "500",
     "Invalid value 500 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
    ("share.record.lock.duration.ms", "61000",
     "share.record.lock.duration.ms must be less than or equal to group.share.max.record.lock.duration.ms"),
    ("consumer.session.timeout.ms", "30000",
     "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
    ("share.heartbeat.interval.ms", "20000",
     "share.heartbeat.interval.ms must be less than or equal to group.share.max.heartbeat.interval.ms"),
    ("share.auto.offset.reset", "middle",
     "Invalid value middle for configuration share.auto.offset.reset: String must be one of: latest, earliest"),
    ("no.such.config", "1", "Unknown group config name: no.such.config"),
])
def test_bad_values_are_invalid_config(broker: BrokerProcess, name: str, value: str, message: str) -> None:
    g = f"bad-{uuid.uuid4().hex[:6]}"
    with pytest.raises(KafkaException) as e:
        alter(broker, g, **{name.replace(".", "_"): value})
    err = e.value.args[0]
    assert err.name() == "INVALID_CONFIG" and err.str() == message
    assert [k for k, e in describe(broker, g).items() if int(e.source) == 8] == []  # nothing stored


def test_cli_alter_and_describe(broker: BrokerProcess) -> None:
    g = f"cli-{uuid.uuid4().hex[:6]}"
    out = samsa("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "groups", "--entity-name", g,
                "--alter", "--add-config", "share.auto.offset.reset=earliest,consumer.heartbeat.interval.ms=6000")
    assert f"Completed updating config for group '{g}'." in out.stdout
    described = samsa_json("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "groups",
                           "--entity-name", g, "--describe")
    assert {c["name"]: (c["value"], c["source"]) for c in described[0]["configs"]} == {
        "share.auto.offset.reset": ("earliest", "DYNAMIC_GROUP_CONFIG"),
        "consumer.heartbeat.interval.ms": ("6000", "DYNAMIC_GROUP_CONFIG")}
    samsa("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "groups", "--entity-name", g,
          "--alter", "--delete-config", "consumer.heartbeat.interval.ms")
    text = samsa("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "groups", "--entity-name", g,
                 "--describe").stdout
    assert f"Dynamic configs for group {g} are:" in text and "share.auto.offset.reset" in text
    assert "consumer.heartbeat.interval.ms" not in text
    # Without a name: every group ListConfigResources names, which includes one with configs only.
    every = samsa_json("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "groups", "--describe")
    assert {"share.auto.offset.reset": "earliest"} == {
        c["name"]: c["value"] for r in every if r["entity_name"] == g for c in r["configs"]}
    bad = samsa("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "groups", "--entity-name", g,
                "--alter", "--add-config", "share.session.timeout.ms=1", check=False)
    assert bad.returncode == 1
    assert "INVALID_CONFIG" in bad.stdout and \
        "share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms" in bad.stdout


def test_group_configs_survive_a_restart(tmp_path: Path) -> None:
    b = make_broker(tmp_path, overrides=CONFIG, name="groupcfg-restart")
    b.start()
    try:
        t = topic_with(b, [b"before"])
        alter(b, "g-restart", share_auto_offset_reset="earliest", consumer_session_timeout_ms="50000")
        b.restart()
        described = describe(b, "g-restart")
        assert described["share.auto.offset.reset"].value == "earliest"
        assert described["consumer.session.timeout.ms"].value == "50000"
        c = share_consumer(b, "g-restart", t)
        try:
            assert values(poll_until(c, 1)) == [b"before"]  # earliest still applies after the restart
        finally:
            c.close()
    finally:
        b.kill()


def test_group_config_acls(broker_factory: Any) -> None:
    """Kafka 4.x: DESCRIBE_CONFIGS / ALTER_CONFIGS on the GROUP resource, else
    GROUP_AUTHORIZATION_FAILED for that resource (ALTER_CONFIGS implies DESCRIBE_CONFIGS)."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType

    b = broker_factory({**CONFIG, "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                        "allow.everyone.if.no.acl.found": "true"})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})

    def acl(group: str, principal: str, op: AclOperation) -> AclBinding:
        return AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, principal, "*", op,
                          AclPermissionType.ALLOW)

    # "locked" has ACLs, none for ANONYMOUS (this plaintext client); "open" has none at all.
    for f in admin.create_acls([acl("locked", "User:bob", AclOperation.ALTER_CONFIGS)]).values():
        f.result(30)
    alter(b, "open", share_auto_offset_reset="earliest")
    with pytest.raises(KafkaException) as e:
        alter(b, "locked", share_auto_offset_reset="earliest")
    assert e.value.args[0].name() == "GROUP_AUTHORIZATION_FAILED"
    with pytest.raises(KafkaException) as e:
        describe(b, "locked")
    assert e.value.args[0].name() == "GROUP_AUTHORIZATION_FAILED"
    for f in admin.create_acls([acl("locked", "User:ANONYMOUS", AclOperation.DESCRIBE_CONFIGS)]).values():
        f.result(30)
    assert describe(b, "locked")["share.auto.offset.reset"].value == "latest"
    with pytest.raises(KafkaException) as e:
        alter(b, "locked", share_auto_offset_reset="earliest")
    assert e.value.args[0].name() == "GROUP_AUTHORIZATION_FAILED"
    for f in admin.create_acls([acl("locked", "User:ANONYMOUS", AclOperation.ALTER_CONFIGS)]).values():
        f.result(30)
    alter(b, "locked", share_auto_offset_reset="earliest")
    assert describe(b, "locked")["share.auto.offset.reset"].value == "earliest"
