"""``samsa schema-registry --bootstrap-server`` (the registry as its own process, against a broker
that serves none) driven by ``samsa schemas`` and by confluent-kafka's client."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from tests.support.brokers import REPO_ROOT, BrokerProcess, make_broker
from tests.support.net import free_port
from tests.support.schema_registry import RegistryHttp

V1 = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
V2 = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"},
                                                              {"name": "note", "type": "string", "default": ""}]})
BAD = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]})


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, RegistryHttp]]:
    base = Path(tmp_path_factory.mktemp("sr-standalone"))
    b = make_broker(base, kind="samsa", name="broker")
    b.start()
    port = free_port()
    log = open(base / "registry.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "broker.cli", "schema-registry", "--bootstrap-server", b.bootstrap,
                             "--listener", f"http://127.0.0.1:{port}", "--replication-factor", "1"],
                            cwd=str(REPO_ROOT), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    reg = RegistryHttp(port)
    try:
        reg.wait_ready()
        yield b, reg
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        b.kill()


def samsa(reg: RegistryHttp, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker.cli", "schemas", "--registry-url", reg.url, *args],
                          cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=120)


def test_schemas_cli_against_the_standalone_registry(standalone: tuple[BrokerProcess, RegistryHttp],
                                                     tmp_path: Path) -> None:
    _, reg = standalone
    (tmp_path / "v1.avsc").write_text(V1)
    (tmp_path / "v2.avsc").write_text(V2)
    out = samsa(reg, "register", "orders-value", "--schema-file", str(tmp_path / "v1.avsc"))
    assert out.returncode == 0, out.stderr
    assert "schema id 1" in out.stdout
    out = samsa(reg, "check", "orders-value", "--schema", BAD)
    assert out.returncode == 1 and "NOT compatible" in out.stdout and "TYPE_MISMATCH" in out.stdout
    out = samsa(reg, "check", "orders-value", "--schema-file", str(tmp_path / "v2.avsc"))
    assert out.returncode == 0 and out.stdout.startswith("compatible")
    out = samsa(reg, "register", "orders-value", "--schema", BAD)
    assert out.returncode == 1 and "Error: 40901:" in out.stderr
    assert samsa(reg, "register", "orders-value", "--schema-file", str(tmp_path / "v2.avsc")).returncode == 0
    out = samsa(reg, "list")
    assert out.returncode == 0 and "orders-value" in out.stdout and " 2 " in out.stdout
    out = samsa(reg, "describe", "orders-value")
    doc = json.loads(out.stdout)
    assert doc["versions"] == [1, 2] and doc["compatibilityLevel"] == "BACKWARD"
    assert json.loads(samsa(reg, "describe", "--id", "1").stdout)["versions"] == [{"subject": "orders-value",
                                                                                   "version": 1}]
    out = samsa(reg, "config", "orders-value", "--set", "full_transitive")
    assert out.returncode == 0 and "FULL_TRANSITIVE" in out.stdout
    assert "FULL_TRANSITIVE" in samsa(reg, "config", "orders-value").stdout
    assert "BACKWARD" in samsa(reg, "config").stdout
    out = samsa(reg, "delete", "orders-value", "--version", "1", "--permanent")
    assert out.returncode == 1 and "40407" in out.stderr
    assert samsa(reg, "delete", "orders-value").returncode == 0
    assert "orders-value" not in samsa(reg, "list").stdout
    assert "orders-value" in samsa(reg, "list", "--deleted").stdout
    # the same registry through confluent-kafka's client
    client = SchemaRegistryClient({"url": reg.url})
    assert client.get_schema(1).schema_str == json.dumps(json.loads(V1), separators=(",", ":"))


def test_cli_reports_an_unreachable_registry() -> None:
    out = subprocess.run([sys.executable, "-m", "broker.cli", "schemas", "--registry-url",
                          f"http://127.0.0.1:{free_port()}", "list"], cwd=str(REPO_ROOT), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1 and "cannot reach the schema registry" in out.stderr
