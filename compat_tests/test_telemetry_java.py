"""KIP-714 client telemetry with the Java client (kafka-clients 3.9.1) against a live broker.

A Java producer asks the broker for its telemetry subscription on its first connection
(GetTelemetrySubscriptions) and, with the empty subscription Samsa gives, pushes nothing and asks
again only after ``PushIntervalMs`` (5 minutes). ``KafkaProducer.clientInstanceId()`` returns the
id the broker assigned, and throws when the broker does not serve telemetry, so it shows the
exchange worked from the client's side. The client's own log (through the small SLF4J binding in
tests/support/java.py, its telemetry loggers at DEBUG) must show no telemetry failure, and the
broker's request log must show exactly one GetTelemetrySubscriptions from the client: no retries.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.java import compile_java, compile_log_binding, run_java

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

SOURCE = r"""
import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.StringSerializer;

public class TelemetryCompat {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("client.id", "telemetry-java");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.send(new ProducerRecord<>(args[1], "k", "v")).get();
            System.out.println("instance " + producer.clientInstanceId(Duration.ofSeconds(20)));
            for (int i = 0; i < 10; i++) {  // a few seconds of traffic: time for a retry, if any
                producer.send(new ProducerRecord<>(args[1], "k" + i, "v")).get();
                Thread.sleep(300);
            }
        }
        System.out.println("closed");
    }
}
"""


@pytest.fixture(scope="module")
def telemetry_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    out: Path = tmp_path_factory.mktemp("telemetry-java")
    cp = compile_java(SOURCE, "TelemetryCompat", out)
    compile_log_binding(out)
    return cp


def test_java_client_gets_an_empty_subscription_and_does_not_retry(
        broker_factory: Any, telemetry_classpath: str) -> None:
    broker = broker_factory({"log.level": "DEBUG"})
    lines = run_java(telemetry_classpath, "TelemetryCompat", broker.bootstrap, "telemetry",
                     jvm_props={"samsa.log.debug": "telemetry", "samsa.log.level": "WARN"})
    [instance] = [ln.split()[1] for ln in lines if ln.startswith("instance ")]
    assert instance != "AAAAAAAAAAAAAAAAAAAAAA", lines  # Uuid.ZERO_UUID: no id was assigned
    assert "closed" in lines
    logs = [ln for ln in lines if ln.startswith("LOG ")]
    # KafkaMetricsCollector lists every metric it registers (names like failed-authentication-total).
    telemetry = [ln for ln in logs if "telemetry" in ln.lower() and "KafkaMetricsCollector" not in ln]
    assert telemetry, f"the client's telemetry loggers said nothing: is the binding in use?\n{lines}"
    bad = [ln for ln in logs if ln.startswith(("LOG WARN", "LOG ERROR"))
           or re.search(r"fail|error|unsupported|retry|backoff", ln, re.I) and ln in telemetry]
    assert not bad, "\n".join(bad)
    assert any("ClientTelemetryReporter" in ln and "subscription" in ln.lower() for ln in telemetry), telemetry
    log = broker.log_text()
    gets = re.findall(r"GET_TELEMETRY_SUBSCRIPTIONS v0 corr=\d+ client='telemetry-java'", log)
    assert len(gets) == 1, gets
    assert any(f"client instance id: {instance}" in ln for ln in telemetry), telemetry
    assert "PUSH_TELEMETRY" not in log  # the empty subscription asks for no metrics


LIST_SOURCE = r"""
import java.util.*;
import org.apache.kafka.clients.admin.*;

public class ListClientMetricsCompat {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(p)) {
            Collection<ClientMetricsResourceListing> l = admin.listClientMetricsResources().all().get();
            System.out.println("client-metrics " + l.size());
        }
    }
}
"""


def test_java_admin_lists_no_client_metrics_resources(broker_factory: Any,
                                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    """Admin.listClientMetricsResources (ListConfigResources v0, once ListClientMetricsResources):
    Samsa has no client-metrics subscriptions, so the list is empty, and the call succeeds."""
    broker = broker_factory({"log.level": "DEBUG"})
    cp = compile_java(LIST_SOURCE, "ListClientMetricsCompat", tmp_path_factory.mktemp("list-cm-java"))
    assert run_java(cp, "ListClientMetricsCompat", broker.bootstrap) == ["client-metrics 0"]
    assert re.search(r"LIST_CONFIG_RESOURCES v0 corr=\d+", broker.log_text())
