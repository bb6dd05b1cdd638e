"""Broker configs Kafka 4.x changes dynamically, through real admin clients (issue 30, item 4).

librdkafka's 0081_admin sets ``sasl.kerberos.min.time.before.relogin=60000`` on broker 0, which
Samsa refused as an unknown config. Every config in Kafka's DynamicBrokerConfig.AllDynamicConfigs
is now accepted per broker, at the cluster-wide default (empty name) and, for the listener
configs, as ``listener.name.<listener>.<config>``; values are checked with Kafka's types and
messages, per-broker configs are refused at the default level, stored, described with their
source and synonyms, and still there after a restart. confluent-kafka (librdkafka) uses
IncrementalAlterConfigs; kafka-python's admin the legacy AlterConfigs and DescribeConfigs.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest

INVALID_CONFIG = 40
BROKER = 4


def _set(admin: AdminClient, name: str, configs: dict[str, str]) -> None:
    res = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin.incremental_alter_configs([res])[res].result(30)


def _refused(admin: AdminClient, name: str, configs: dict[str, str]) -> tuple[int, str]:
    with pytest.raises(KafkaException) as err:
        _set(admin, name, configs)
    e = err.value.args[0]
    return e.code(), e.str()


def _describe(admin: AdminClient, name: str) -> dict[str, Any]:
    res = ConfigResource(ResourceType.BROKER, name)
    return admin.describe_configs([res])[res].result(30)  # type: ignore[no-any-return]


def _kp(broker: Any) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)


def _send(broker: Any, req: Any) -> Any:
    """A request through kafka-python's client: neither admin API can name the cluster-wide default
    (confluent-kafka and kafka-python both refuse an empty broker name), the wire protocol can."""
    kp = _kp(broker)

    async def send() -> Any:
        return await kp._manager.send(req, node_id=0)

    try:
        return kp._manager.run(send)
    finally:
        kp.close()


def _set_default(broker: Any, configs: dict[str, str]) -> tuple[int, str | None]:
    r = _send(broker, IncrementalAlterConfigsRequest(
        resources=[(BROKER, "", [(k, 0, v) for k, v in configs.items()])], validate_only=False))
    [res] = r.responses
    return res.error_code, res.error_message


def _describe_raw(broker: Any, name: str) -> dict[str, Any]:
    """DescribeConfigs v1+ with synonyms as sent (confluent-kafka keys synonyms by name, which folds
    a config's per-broker and default entries into one)."""
    r = _send(broker, DescribeConfigsRequest(resources=[(BROKER, name, None)], include_synonyms=True))
    [res] = r.results
    assert res.error_code == 0, res.error_message
    return {c.name: {"value": c.value, "config_source": ConfigSource(c.config_source).name,
                     "synonyms": [(y.name, ConfigSource(y.source).name) for y in c.synonyms]} for c in res.configs}


def _describe_default(broker: Any) -> dict[str, Any]:
    return _describe_raw(broker, "")


def test_kafka_dynamic_broker_configs_are_accepted_stored_and_described(broker: Any) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # librdkafka's 0081_admin case
    _set(admin, "0", {"sasl.kerberos.min.time.before.relogin": "60000"})
    per_broker = {
        "num.io.threads": "16",  # DynamicThreadPool: at most double the current 8
        "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384",
        "ssl.client.auth": "requested",
        "sasl.kerberos.service.name": "kafka",
        "sasl.login.refresh.window.factor": "0.9",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,GSSAPI",
        "log.cleaner.io.buffer.size": "1048576",
        "remote.fetch.max.wait.ms": "600",
        "follower.fetch.last.tiered.offset.enable": "true",
        "transaction.partition.verification.enable": "false",
        "listener.name.plaintext.sasl.kerberos.service.name": "kafka-plain",
    }
    _set(admin, "0", per_broker)
    cluster_default = {"log.cleaner.backoff.ms": "20000", "message.max.bytes": "2000000",
                       "max.connections.per.ip": "5000", "listener.name.plaintext.max.connections": "900",
                       "log.retention.hours": "100"}
    assert _set_default(broker, cluster_default) == (0, None)

    def check(d0: dict[str, Any], dflt: dict[str, Any]) -> None:
        relogin = d0["sasl.kerberos.min.time.before.relogin"]
        assert (relogin.value, ConfigSource(relogin.source)) == ("60000", ConfigSource.DYNAMIC_BROKER_CONFIG)
        assert not relogin.is_read_only
        for k, v in per_broker.items():
            assert (d0[k].value, ConfigSource(d0[k].source)) == (v, ConfigSource.DYNAMIC_BROKER_CONFIG), k
        for k, v in cluster_default.items():
            assert (d0[k].value, ConfigSource(d0[k].source)) == (v, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG), k
            assert (dflt[k]["value"], dflt[k]["config_source"]) == (v, "DYNAMIC_DEFAULT_BROKER_CONFIG"), k
        assert "sasl.kerberos.min.time.before.relogin" not in dflt  # the default entity shows its own layer
        # a config not set anywhere: Kafka's default
        jitter = d0["sasl.kerberos.ticket.renew.jitter"]
        assert (jitter.value, ConfigSource(jitter.source)) == ("0.05", ConfigSource.DEFAULT_CONFIG)

    check(_describe(admin, "0"), _describe_default(broker))
    raw = _describe_raw(broker, "0")
    assert raw["sasl.kerberos.min.time.before.relogin"]["synonyms"] == [
        ("sasl.kerberos.min.time.before.relogin", "DYNAMIC_BROKER_CONFIG"),
        ("sasl.kerberos.min.time.before.relogin", "DEFAULT_CONFIG")]
    # a listener config's synonyms: the prefixed name, then the base config's chain (as Kafka)
    assert raw["listener.name.plaintext.sasl.kerberos.service.name"]["synonyms"] == [
        ("listener.name.plaintext.sasl.kerberos.service.name", "DYNAMIC_BROKER_CONFIG"),
        ("sasl.kerberos.service.name", "DYNAMIC_BROKER_CONFIG"),
        ("sasl.kerberos.service.name", "DEFAULT_CONFIG")]
    assert raw["log.retention.hours"]["synonyms"] == [("log.retention.hours", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
                                                      ("log.retention.hours", "DEFAULT_CONFIG")]

    # kafka-python: DescribeConfigs through its own admin sees the same
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        got = kp.describe_configs([KpConfigResource("broker", "0")], config_filter="all")["broker"]["0"]
        assert got["sasl.kerberos.min.time.before.relogin"]["value"] == "60000"
        assert got["sasl.kerberos.min.time.before.relogin"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
        assert got["log.cleaner.backoff.ms"]["config_source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    finally:
        kp.close()

    # stored: a restart keeps both layers
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    check(_describe(admin, "0"), _describe_default(broker))


def test_bad_dynamic_broker_configs_get_kafkas_errors(broker: Any) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    cases = [
        ("0", {"sasl.kerberos.min.time.before.relogin": "soon"},
         "Invalid value soon for configuration sasl.kerberos.min.time.before.relogin: Not a number of type LONG"),
        ("0", {"listener.name.plaintext.sasl.kerberos.min.time.before.relogin": "soon"},
         "Invalid value soon for configuration sasl.kerberos.min.time.before.relogin: Not a number of type LONG"),
        ("0", {"sasl.login.refresh.window.factor": "2"},
         "Invalid value 2 for configuration sasl.login.refresh.window.factor: Value must be no more than 1.0"),
        ("0", {"sasl.login.refresh.buffer.seconds": "-1"},
         "Invalid value -1 for configuration sasl.login.refresh.buffer.seconds: Value must be at least 0"),
        ("0", {"ssl.client.auth": "maybe"},
         "Invalid value maybe for configuration ssl.client.auth: String must be one of: required, requested, none"),
        ("0", {"transaction.partition.verification.enable": "yes"},
         "Invalid value yes for configuration transaction.partition.verification.enable: Expected value to be "
         "either true or false"),
        ("0", {"num.io.threads": "100"},
         "Dynamic thread count update validation failed for num.io.threads=100, value should not be greater "
         "than double the current value 8"),
        ("0", {"num.io.threads": "0"}, "Invalid value 0 for configuration num.io.threads: Value must be at least 1"),
        ("0", {"sasl.kerberos.bogus": "1"}, "Unknown broker config name: sasl.kerberos.bogus"),
        ("0", {"listener.name.plaintext.log.retention.ms": "1"},
         "Unknown broker config name: listener.name.plaintext.log.retention.ms"),
        ("0", {"broker.id": "7"}, "Cannot update these configs dynamically: [broker.id]"),
    ]
    for name, configs, message in cases:
        assert _refused(admin, name, configs) == (INVALID_CONFIG, message), configs
    # per-broker configs at the cluster-wide default
    for config, value in (("sasl.kerberos.min.time.before.relogin", "60000"),
                          ("listener.name.plaintext.ssl.client.auth", "required")):
        assert _set_default(broker, {config: value}) == (
            INVALID_CONFIG, f"Cannot update these configs at default cluster level, broker id must be specified: "
                            f"[{config}]")
    # nothing of it was stored
    d0 = _describe(admin, "0")
    assert ConfigSource(d0["sasl.kerberos.min.time.before.relogin"].source) == ConfigSource.DEFAULT_CONFIG
    assert d0["num.io.threads"].value == "8"


def test_kafka_python_alter_configs_sets_a_dynamic_broker_config(broker: Any) -> None:
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        kp.alter_configs([KpConfigResource("broker", "0", {"sasl.kerberos.min.time.before.relogin": "90000",
                                                           "log.cleaner.dedupe.buffer.load.factor": "0.8"})])
        got = kp.describe_configs([KpConfigResource("broker", "0")], config_filter="all")["broker"]["0"]
    finally:
        kp.close()
    for k, v in (("sasl.kerberos.min.time.before.relogin", "90000"), ("log.cleaner.dedupe.buffer.load.factor", "0.8")):
        assert (got[k]["value"], got[k]["config_source"]) == (v, "DYNAMIC_BROKER_CONFIG")
