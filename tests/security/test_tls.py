"""TLS listeners (issue 10): keystores, client authentication and its principal, bad files,
protocol mix-ups, and reloading certificates through AlterConfigs, over real sockets."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cryptography import x509
from kafka.admin import KafkaAdminClient

from broker.config.properties import BrokerConfig
from broker.security import SecurityConfigError
from broker.security.listeners import inter_broker_client_config, listener_configs
from broker.security.principal import parse_mapping_rules
from broker.security.tls import build_server_context, peer_principal
from broker.tools._common import send_request
from tests.support.net import api_versions_v0, free_port, port_accepts, recv_frame
from tests.support.security import P12_PASSWORD, make_pki, start_secure_broker


def _served_cert_cn(port: int, ca: Path) -> str:
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as s:
        cert = x509.load_der_x509_certificate(s.getpeercert(binary_form=True))
        return cert.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)[0].value  # type: ignore[return-value]


def _principal_over_tls(props: dict[str, str], client_cert: tuple[Path, Path] | None, ca: Path) -> str:
    """Handshake a real TLS connection against a context built from ``props``; the principal."""
    lc = next(lc for lc in listener_configs(BrokerConfig(props)) if lc.name == "SSL")
    server_ctx = build_server_context(lc)
    rules = parse_mapping_rules(lc.get("ssl.principal.mapping.rules", "DEFAULT") or "DEFAULT")
    lsock = socket.create_server(("127.0.0.1", 0))
    port = lsock.getsockname()[1]
    result: dict[str, str] = {}

    def serve() -> None:
        conn, _ = lsock.accept()
        with server_ctx.wrap_socket(conn, server_side=True) as s:
            result["principal"] = peer_principal(s, rules)  # type: ignore[arg-type]
            s.sendall(b"ok")

    t = threading.Thread(target=serve)
    t.start()
    cctx = ssl.create_default_context(cafile=str(ca))
    if client_cert:
        cctx.load_cert_chain(str(client_cert[0]), str(client_cert[1]))
    with socket.create_connection(("127.0.0.1", port)) as raw, cctx.wrap_socket(raw, server_hostname="localhost") as s:
        assert s.recv(2) == b"ok"
    t.join(10)
    lsock.close()
    return result["principal"]


def test_client_certificate_principal_and_mapping_rules(tmp_path):
    pki = make_pki(tmp_path)
    base = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(pki.server_p12),
            "ssl.keystore.type": "PKCS12", "ssl.keystore.password": P12_PASSWORD,
            "ssl.truststore.location": str(pki.ca), "ssl.client.auth": "requested"}
    cert = (pki.client_crt, pki.client_key)
    assert _principal_over_tls(base, cert, pki.ca) == "User:CN=alice,OU=eng,O=Samsa"
    assert _principal_over_tls(base, None, pki.ca) == "User:ANONYMOUS"
    mapped = {**base, "ssl.principal.mapping.rules": "RULE:^CN=([a-z]+),OU=eng,.*$/$1-eng/U,DEFAULT"}
    assert _principal_over_tls(mapped, cert, pki.ca) == "User:ALICE-ENG"


def test_inline_pem_keystore_and_inter_broker_settings(tmp_path):
    pki = make_pki(tmp_path)
    props = {"listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
             "inter.broker.listener.name": "INTERNAL",
             "listener.name.internal.ssl.keystore.certificate.chain": pki.server_crt.read_text(),
             "listener.name.internal.ssl.keystore.key": pki.server_key.read_text(),
             "listener.name.internal.ssl.truststore.location": str(pki.ca),
             "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
             "listener.name.internal.scram-sha-512.sasl.jaas.config":
                 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
                 'password="broker-secret";'}
    lcs = {lc.name: lc for lc in listener_configs(BrokerConfig(props))}
    assert lcs["INTERNAL"].security_protocol.value == "SASL_SSL"
    assert isinstance(build_server_context(lcs["INTERNAL"]), ssl.SSLContext)
    client = inter_broker_client_config(BrokerConfig(props))
    assert client["bootstrap.servers"] == "127.0.0.1:9093"
    assert client["security.protocol"] == "SASL_SSL" and client["sasl.mechanism"] == "SCRAM-SHA-512"
    assert client["ssl.truststore.location"] == str(pki.ca)
    assert 'username="broker"' in client["sasl.jaas.config"]
    with pytest.raises(SecurityConfigError, match="No security protocol defined for listener"):
        listener_configs(BrokerConfig({"listeners": "EXTERNAL://127.0.0.1:1"}))


@pytest.mark.parametrize("case", ["missing", "garbage", "wrong-p12-password", "gssapi"])
def test_bad_security_config_stops_the_broker_with_a_clear_message(tmp_path, case):
    pki = make_pki(tmp_path / "pki")
    bad = tmp_path / "bad.pem"
    bad.write_text("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
    port = free_port()
    props = {"listeners": f"SSL://127.0.0.1:{port}", "log.dirs": str(tmp_path / "data"),
             "ssl.keystore.location": {"missing": str(tmp_path / "nope.pem"), "garbage": str(bad)}.get(
                 case, str(pki.server_p12)),
             "ssl.keystore.password": "wrong" if case == "wrong-p12-password" else P12_PASSWORD}
    if case == "gssapi":
        props["listeners"] = f"SASL_PLAINTEXT://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "broker"] + [a for k, v in props.items() for a in ("--override", f"{k}={v}")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert "Traceback" not in text
    expected = {"missing": "cannot read ssl.keystore.location", "garbage": "must hold a PEM certificate chain",
                "wrong-p12-password": "cannot open the PKCS12 keystore", "gssapi": "SASL mechanism GSSAPI"}[case]
    assert "Invalid security configuration" in text and expected in text, text


def test_plaintext_to_tls_and_tls_to_plaintext_are_refused(broker_factory, tmp_path):
    pki = make_pki(tmp_path / "pki")
    sb = start_secure_broker(broker_factory, pki)
    with socket.create_connection(("127.0.0.1", sb.ssl), timeout=10) as s:  # Kafka bytes to a TLS port
        s.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
        s.settimeout(10)
        try:
            data = s.recv(100)
            while data and not data.startswith(b"\x15"):  # a TLS alert or a close, never a Kafka response
                data = s.recv(100)
        except ConnectionResetError:
            pass
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    with socket.create_connection(("127.0.0.1", sb.plaintext), timeout=10) as raw:  # TLS to a plaintext port
        with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
            ctx.wrap_socket(raw, server_hostname="localhost")
    assert api_versions_v0("127.0.0.1", sb.plaintext)  # still healthy
    assert _served_cert_cn(sb.ssl, pki.ca) == "localhost"


def test_client_auth_required_and_certificate_reload_via_alter_configs(broker_factory, tmp_path):
    pki = make_pki(tmp_path / "pki")
    sb = start_secure_broker(broker_factory, pki, **{"listener.name.ssl.ssl.client.auth": "required",
                                                     "password.encoder.secret": "encoder-secret"})
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    with socket.create_connection(("127.0.0.1", sb.ssl), timeout=10) as raw:  # no client cert: refused
        try:
            s = ctx.wrap_socket(raw, server_hostname="localhost")
            s.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
            with pytest.raises((ssl.SSLError, ConnectionError)):
                recv_frame(s)  # TLS 1.3: the alert arrives after the handshake
        except ssl.SSLError:
            pass
    ctx.load_cert_chain(str(pki.client_crt), str(pki.client_key))
    with socket.create_connection(("127.0.0.1", sb.ssl), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as s:
        s.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
        assert len(recv_frame(s)) > 10  # ApiVersions answered over mutual TLS

    # Rotate: a new server certificate (same CA) with another CN, set through IncrementalAlterConfigs.
    new = make_pki(tmp_path / "pki2", server_cn="rotated.localhost")
    rotated = tmp_path / "rotated.pem"
    rotated.write_bytes(new.server_pem.read_bytes())
    admin = KafkaAdminClient(bootstrap_servers=sb.addr(sb.plaintext))
    from kafka.protocol.admin import IncrementalAlterConfigsRequest

    def alter(path: str) -> tuple[int, str | None]:
        req = IncrementalAlterConfigsRequest(resources=[(4, "0", [
            ("listener.name.ssl.ssl.keystore.location", 0, path),
            ("listener.name.ssl.ssl.key.password", 0, "topsecret-xyz")])], validate_only=False)
        r = send_request(admin, req, node_id=0).responses[0]
        return r.error_code, r.error_message

    code, msg = alter(str(tmp_path / "missing.pem"))
    assert code == 40 and "cannot read ssl.keystore.location" in (msg or "")  # INVALID_CONFIG, old cert kept
    assert _served_cert_cn(sb.ssl, pki.ca) == "localhost"
    code, _ = alter(str(rotated))
    assert code == 0
    assert _served_cert_cn(sb.ssl, new.ca) == "rotated.localhost"
    assert "topsecret-xyz" not in sb.broker.log_text()  # dynamic passwords are not logged
    admin.close()
    assert port_accepts("127.0.0.1", sb.plaintext)


def test_properties_file_line_continuation_for_jaas(tmp_path):
    from broker.config.properties import read_properties
    from broker.security.jaas import parse_jaas

    f = tmp_path / "server.properties"
    f.write_text('listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.'
                 'PlainLoginModule required \\\n    user_alice="alice-secret" \\\n    user_bob="b";\nnext=1\n')
    props = read_properties(f)
    assert parse_jaas(props["listener.name.sasl_ssl.plain.sasl.jaas.config"]).users() == {"alice": "alice-secret",
                                                                                         "bob": "b"}
    assert props["next"] == "1"


def test_enabled_protocols_and_cipher_suites(tmp_path):
    from broker.security.tls import iana_to_openssl

    pki = make_pki(tmp_path)
    assert iana_to_openssl("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256") == "ECDHE-ECDSA-AES128-GCM-SHA256"
    assert iana_to_openssl("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256") == "ECDHE-RSA-CHACHA20-POLY1305-SHA256"
    base = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(pki.server_pem)}

    def handshake(props: dict[str, str], client_max: ssl.TLSVersion) -> str:
        lc = listener_configs(BrokerConfig(props))[0]
        sctx = build_server_context(lc)
        lsock = socket.create_server(("127.0.0.1", 0))
        out: dict[str, str] = {}

        def serve() -> None:
            conn, _ = lsock.accept()
            try:
                with sctx.wrap_socket(conn, server_side=True) as s:
                    out["cipher"] = s.cipher()[0]  # type: ignore[index]
            except (ssl.SSLError, OSError):
                out["cipher"] = "refused"

        t = threading.Thread(target=serve)
        t.start()
        cctx = ssl.create_default_context(cafile=str(pki.ca))
        cctx.maximum_version = client_max
        try:
            with socket.create_connection(lsock.getsockname()) as raw, \
                    cctx.wrap_socket(raw, server_hostname="localhost"):
                pass
        except (ssl.SSLError, OSError):
            pass
        t.join(10)
        lsock.close()
        return out["cipher"]

    tls13_only = {**base, "ssl.enabled.protocols": "TLSv1.3"}
    assert handshake(tls13_only, ssl.TLSVersion.TLSv1_2) == "refused"
    assert handshake(tls13_only, ssl.TLSVersion.TLSv1_3).startswith("TLS_")
    one_suite = {**base, "ssl.enabled.protocols": "TLSv1.2",
                 "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}
    assert handshake(one_suite, ssl.TLSVersion.TLSv1_2) == "ECDHE-ECDSA-AES256-GCM-SHA384"
    # TLS 1.3 suites are Kafka's names too; a version left without a listed suite is off (as in the JDK)
    tls13_suite = {**base, "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}
    assert handshake(tls13_suite, ssl.TLSVersion.TLSv1_3) == "TLS_AES_128_GCM_SHA256"
    assert handshake(tls13_suite, ssl.TLSVersion.TLSv1_2) == "refused"
    both = {**base, "ssl.cipher.suites": "TLS_CHACHA20_POLY1305_SHA256, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}
    assert handshake(both, ssl.TLSVersion.TLSv1_3) == "TLS_CHACHA20_POLY1305_SHA256"
    assert handshake(both, ssl.TLSVersion.TLSv1_2) == "ECDHE-ECDSA-AES128-GCM-SHA256"
    tls12_suite = {**base, "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}
    assert handshake(tls12_suite, ssl.TLSVersion.TLSv1_3) == "ECDHE-ECDSA-AES256-GCM-SHA384"
    with pytest.raises(SecurityConfigError, match="unknown TLS 1.3 suite"):
        build_server_context(listener_configs(BrokerConfig({**base, "ssl.cipher.suites": "TLS_AES_512_GCM_SHA999"}))[0])
    with pytest.raises(SecurityConfigError, match="ssl.cipher.suites"):
        build_server_context(listener_configs(BrokerConfig({**base, "ssl.enabled.protocols": "TLSv1.2",
                                                            "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}))[0])
    with pytest.raises(SecurityConfigError, match="ssl.enabled.protocols"):
        build_server_context(listener_configs(BrokerConfig({**base, "ssl.enabled.protocols": "SSLv3"}))[0])
    with pytest.raises(SecurityConfigError, match="ssl.cipher.suites"):
        build_server_context(listener_configs(BrokerConfig({**base, "ssl.enabled.protocols": "TLSv1.2",
                                                            "ssl.cipher.suites": "NOPE"}))[0])
