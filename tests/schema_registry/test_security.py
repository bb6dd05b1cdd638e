"""The registry behind the broker's security: https with the broker's keystore, HTTP Basic against
the broker's PLAIN and SCRAM users, subjects under the broker's topic ACLs, Confluent's 401/403.

The broker has PLAINTEXT (the registry's own Kafka connection), SSL, SASL_PLAINTEXT and SASL_SSL
listeners and the ACL authorizer with allow.everyone.if.no.acl.found=true, so only the topic the
test puts ACLs on (``secret``) is restricted.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient

from broker.schema_registry.election import forward
from broker.schema_registry.http import Request
from broker.schema_registry.server import forward_ssl_context
from tests.support.brokers import REPO_ROOT
from tests.support.net import free_port, wait_until
from tests.support.schema_registry import RegistryHttp
from tests.support.security import make_pki, scram_user, start_secure_broker

SCHEMA = json.dumps({"type": "record", "name": "S", "fields": [{"name": "a", "type": "int"}]})


class Https:
    def __init__(self, port: int, ca: Path) -> None:
        self.port = port
        self.ctx = ssl.create_default_context(cafile=str(ca))

    def call(self, method: str, path: str, body: Any = None, user: str | None = None) -> tuple[int, Any, dict[str, str]]:
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=60)
        headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
        if user is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(user.encode()).decode()
        try:
            conn.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, json.loads(data) if data else None, {k.lower(): v for k, v in resp.getheaders()}
        finally:
            conn.close()


def test_https_basic_auth_and_subject_acls(broker_factory: Any, tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    port = free_port()
    sb = start_secure_broker(broker_factory, pki, **{
        "schema.registry.listeners": f"https://127.0.0.1:{port}",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true"})
    bootstrap = sb.addr(sb.plaintext)
    scram_user(bootstrap, "carol", "carol-pw", "SCRAM-SHA-512")
    out = subprocess.run([sys.executable, "-m", "broker.tools", "acls", "--bootstrap-server", bootstrap, "--add",
                          "--allow-principal", "User:alice", "--operation", "Write", "--operation", "Describe",
                          "--topic", "secret"], cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    reg = Https(port, pki.ca)

    def ready() -> bool:
        try:
            return reg.call("GET", "/config", user="alice:alice-secret")[0] == 200
        except OSError:
            return False

    assert wait_until(ready, 60)

    # no credentials, a wrong password, an unknown user: 401 with Confluent's body and a challenge
    for user in (None, "alice:wrong", "nobody:x", "carol:alice-secret"):
        status, doc, headers = reg.call("GET", "/subjects", user=user)
        assert (status, doc) == (401, {"error_code": 401, "message": "Unauthorized"}), user
        assert headers["www-authenticate"].startswith("Basic")

    # alice (PLAIN) may write the secret topic's subject; carol (SCRAM) may not, but may write others
    status, doc, _ = reg.call("POST", "/subjects/secret-value/versions", {"schema": SCHEMA}, user="alice:alice-secret")
    assert status == 200
    status, doc, _ = reg.call("POST", "/subjects/secret-value/versions", {"schema": SCHEMA}, user="carol:carol-pw")
    assert (status, doc["error_code"]) == (403, 40301) and "secret-value" in doc["message"]
    status, doc, _ = reg.call("GET", "/subjects/secret-value/versions/latest", user="carol:carol-pw")
    assert (status, doc["error_code"]) == (403, 40301)
    assert reg.call("POST", "/subjects/open-value/versions", {"schema": SCHEMA}, user="carol:carol-pw")[0] == 200
    # listings show each user only what it may read
    assert reg.call("GET", "/subjects", user="carol:carol-pw")[1] == ["open-value"]
    assert reg.call("GET", "/subjects", user="alice:alice-secret")[1] == ["open-value", "secret-value"]

    # a write forwarded to a primary over https, trusted through the broker's truststore, with
    # the user's credentials passed on (what a registry that is not primary does)
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_verify_locations(str(pki.ca))  # as the broker's listener loads its truststore
    auth = {"authorization": "Basic " + base64.b64encode(b"carol:carol-pw").decode(),
            "content-type": "application/vnd.schemaregistry.v1+json"}
    req = Request("POST", "/subjects/forwarded-value/versions", ["subjects", "forwarded-value", "versions"], {},
                  auth, json.dumps({"schema": SCHEMA}).encode())
    status, body = asyncio.run(forward(f"https://127.0.0.1:{port}", req, forward_ssl_context(server_side)))
    assert status == 200 and json.loads(body)["version"] == 1
    req.path, req.segments = "/subjects/secret-value/versions", ["subjects", "secret-value", "versions"]
    status, body = asyncio.run(forward(f"https://127.0.0.1:{port}", req, forward_ssl_context(server_side)))
    assert (status, json.loads(body)["error_code"]) == (403, 40301)

    # confluent-kafka's client over https with basic auth
    client = SchemaRegistryClient({"url": f"https://127.0.0.1:{port}", "ssl.ca.location": str(pki.ca),
                                   "basic.auth.user.info": "alice:alice-secret"})
    assert client.get_latest_version("secret-value").version == 1
    denied = SchemaRegistryClient({"url": f"https://127.0.0.1:{port}", "ssl.ca.location": str(pki.ca),
                                   "basic.auth.user.info": "alice:nope"})
    try:
        denied.get_subjects()
        raise AssertionError("a wrong password was accepted")
    except Exception as e:  # SchemaRegistryError
        assert getattr(e, "http_status_code", None) == 401


def test_standalone_registry_checks_http_users_against_the_cluster(broker_factory: Any, tmp_path: Path) -> None:
    """``samsa schema-registry`` against a SASL cluster: HTTP Basic users are the cluster's (a PLAIN
    user and a SCRAM-SHA-512 user, checked by SASL logins to the cluster), subjects follow the
    cluster's topic ACLs (asked of the cluster as the user, KIP-430); Confluent's 401 and 403."""
    pki = make_pki(tmp_path / "pki")
    sb = start_secure_broker(broker_factory, pki, **{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                                      "allow.everyone.if.no.acl.found": "true"})
    bootstrap = sb.addr(sb.plaintext)
    scram_user(bootstrap, "reg", "reg-pw", "SCRAM-SHA-256")
    scram_user(bootstrap, "carol", "carol-pw", "SCRAM-SHA-512")
    out = subprocess.run([sys.executable, "-m", "broker.tools", "topics", "--bootstrap-server", bootstrap, "--create",
                          "--topic", "secret", "--partitions", "1", "--replication-factor", "1"],
                         cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    out = subprocess.run([sys.executable, "-m", "broker.tools", "acls", "--bootstrap-server", bootstrap, "--add",
                          "--allow-principal", "User:alice", "--operation", "Write", "--operation", "Describe",
                          "--topic", "secret"], cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                     'username="reg" password="reg-pw";\n')
    port = free_port()
    log = open(tmp_path / "standalone.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "broker.cli", "schema-registry", "--bootstrap-server",
                             sb.addr(sb.sasl_plaintext), "--listener", f"http://127.0.0.1:{port}",
                             "--replication-factor", "1", "--command-config", str(props)],
                            cwd=str(REPO_ROOT), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    reg = RegistryHttp(port)

    def call(method: str, path: str, user: str | None, body: Any = None) -> tuple[int, Any, dict[str, str]]:
        headers = {} if user is None else {"Authorization": "Basic " + base64.b64encode(user.encode()).decode()}
        return reg.request(method, path, body, headers=headers)

    try:
        assert wait_until(lambda: _ok(lambda: call("GET", "/config", "reg:reg-pw")[0] == 200), 60), \
            (tmp_path / "standalone.log").read_text()[-3000:]
        for user in (None, "alice:wrong", "nobody:x", "carol:alice-secret", "carol:carol-pw:"):
            status, doc, headers = call("GET", "/subjects", user)
            assert (status, doc) == (401, {"error_code": 401, "message": "Unauthorized"}), user
            assert headers["www-authenticate"].startswith("Basic")
        # alice (PLAIN, ACL'd on topic "secret") may write its subject; carol (SCRAM-SHA-512) may not
        assert call("POST", "/subjects/secret-value/versions", "alice:alice-secret", {"schema": SCHEMA})[0] == 200
        status, doc, _ = call("POST", "/subjects/secret-value/versions", "carol:carol-pw", {"schema": SCHEMA})
        assert (status, doc["error_code"]) == (403, 40301) and "secret-value" in doc["message"]
        status, doc, _ = call("GET", "/subjects/secret-value/versions/latest", "carol:carol-pw")
        assert (status, doc["error_code"]) == (403, 40301)
        # a subject whose topic does not exist yet: no ACL on it, so everyone may (as the cluster says)
        assert call("POST", "/subjects/open-value/versions", "carol:carol-pw", {"schema": SCHEMA})[0] == 200
        assert call("GET", "/subjects", "carol:carol-pw")[1] == ["open-value"]
        assert call("GET", "/subjects", "alice:alice-secret")[1] == ["open-value", "secret-value"]
        # confluent-kafka's client with basic auth
        client = SchemaRegistryClient({"url": reg.url, "basic.auth.user.info": "alice:alice-secret"})
        assert client.get_latest_version("secret-value").version == 1
        denied = SchemaRegistryClient({"url": reg.url, "basic.auth.user.info": "alice:nope"})
        try:
            denied.get_subjects()
            raise AssertionError("a wrong password was accepted")
        except Exception as e:  # SchemaRegistryError
            assert getattr(e, "http_status_code", None) == 401
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_standalone_registry_over_sasl_reads_the_same_schemas(broker_factory: Any, tmp_path: Path) -> None:
    """``samsa schema-registry --command-config`` connects with SCRAM over SASL_PLAINTEXT and
    serves what the broker's own registry wrote to _schemas."""
    pki = make_pki(tmp_path / "pki")
    port = free_port()
    sb = start_secure_broker(broker_factory, pki, **{"schema.registry.listeners": f"http://127.0.0.1:{port}"})
    scram_user(sb.addr(sb.plaintext), "reg", "reg-pw", "SCRAM-SHA-256")

    def call(p: int, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", p, timeout=60)
        headers = {"Content-Type": "application/vnd.schemaregistry.v1+json",
                   "Authorization": "Basic " + base64.b64encode(b"reg:reg-pw").decode()}
        try:
            conn.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, json.loads(data) if data else None
        finally:
            conn.close()

    assert wait_until(lambda: _ok(lambda: call(port, "GET", "/config")[0] == 200), 60)
    assert call(port, "POST", "/subjects/sasl-value/versions", {"schema": SCHEMA})[0] == 200
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                     'username="reg" password="reg-pw";\n')
    port2 = free_port()
    log = open(tmp_path / "standalone.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "broker.cli", "schema-registry", "--bootstrap-server",
                             sb.addr(sb.sasl_plaintext), "--listener", f"http://127.0.0.1:{port2}",
                             "--replication-factor", "1", "--command-config", str(props)],
                            cwd=str(REPO_ROOT), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        assert wait_until(lambda: _ok(lambda: call(port2, "GET", "/subjects")[1] == ["sasl-value"]), 60), \
            (tmp_path / "standalone.log").read_text()[-3000:]
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _ok(fn: Any) -> bool:
    try:
        return bool(fn())
    except OSError:
        return False
