"""Test scaffolding for issue 10: a CA and certificates made with ``cryptography``, and a Samsa
broker with a PLAINTEXT listener (for readiness and admin) plus SSL, SASL_PLAINTEXT and
SASL_SSL listeners, each on its own free port.

``make_pki(dir)`` writes: ``ca.pem``; ``server.pem`` (key + chain, PEM keystore), ``server.p12``
(PKCS12, password ``changeit``), ``server.crt``/``server.key``; and for mutual TLS
``client.crt``/``client.key``/``client.pem`` with subject ``CN=alice,OU=eng,O=Samsa``.
``start_secure_broker(factory, pki)`` starts the broker; users: PLAIN alice/alice-secret and
admin/admin-secret; SCRAM credentials are created by the tests (``scram_user``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12

from broker.testing import certs

from .net import free_port

P12_PASSWORD = "changeit"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


@dataclass
class Pki:
    dir: Path
    ca: Path
    server_pem: Path
    server_p12: Path
    server_crt: Path
    server_key: Path
    client_crt: Path
    client_key: Path
    client_pem: Path


# The certificates pass Python 3.13's default VERIFY_X509_STRICT: broker/testing/certs.py
_name = certs.name
_pem_key = certs.pem_key


def make_pki(d: Path, server_cn: str = "localhost") -> Pki:
    d.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(CN="Samsa Test CA", O="Samsa")
    ca = certs.certificate(ca_name, ca_key, ca_name, ca_key, ca=True)
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = certs.certificate(_name(CN=server_cn, O="Samsa"), srv_key, ca_name, ca_key, server=True, client=True,
                            hosts=("localhost", "127.0.0.1"))
    cli_key = ec.generate_private_key(ec.SECP256R1())
    cli = certs.certificate(_name(CN="alice", OU="eng", O="Samsa"), cli_key, ca_name, ca_key, client=True)
    pem = serialization.Encoding.PEM
    p = Pki(d, d / "ca.pem", d / "server.pem", d / "server.p12", d / "server.crt", d / "server.key",
            d / "client.crt", d / "client.key", d / "client.pem")
    p.ca.write_bytes(ca.public_bytes(pem))
    p.server_crt.write_bytes(srv.public_bytes(pem) + ca.public_bytes(pem))
    p.server_key.write_bytes(_pem_key(srv_key))
    p.server_pem.write_bytes(_pem_key(srv_key) + srv.public_bytes(pem) + ca.public_bytes(pem))
    p.server_p12.write_bytes(pkcs12.serialize_key_and_certificates(
        b"server", srv_key, srv, [ca], serialization.BestAvailableEncryption(P12_PASSWORD.encode())))
    p.client_crt.write_bytes(cli.public_bytes(pem))
    p.client_key.write_bytes(_pem_key(cli_key))
    p.client_pem.write_bytes(_pem_key(cli_key) + cli.public_bytes(pem))
    return p


@dataclass
class SecureBroker:
    broker: Any
    plaintext: int
    ssl: int
    sasl_plaintext: int
    sasl_ssl: int

    def addr(self, port: int) -> str:
        return f"127.0.0.1:{port}"


def secure_overrides(pki: Pki, ports: dict[str, int], **extra: object) -> dict[str, object]:
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    o: dict[str, object] = {
        "listeners": listeners,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server_pem),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
    }
    o.update(extra)
    return o


def start_secure_broker(factory: Any, pki: Pki, **extra: object) -> SecureBroker:
    """PLAINTEXT on the fixture's port (readiness, admin), SSL, SASL_PLAINTEXT, SASL_SSL beside it."""
    b = factory(start=False)
    ports = {"PLAINTEXT": b.port, "SSL": free_port("127.0.0.1"), "SASL_PLAINTEXT": free_port("127.0.0.1"),
             "SASL_SSL": free_port("127.0.0.1")}
    for k, v in secure_overrides(pki, ports, **extra).items():
        b.overrides[k] = str(v)
    b.start()
    return SecureBroker(b, ports["PLAINTEXT"], ports["SSL"], ports["SASL_PLAINTEXT"], ports["SASL_SSL"])


def scram_user(bootstrap: str, user: str, password: str, mechanism: str = "SCRAM-SHA-256",
               iterations: int = 4096) -> None:
    """Create a SCRAM credential through ``samsa configs`` (AlterUserScramCredentials)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "broker.tools", "configs", "--bootstrap-server", bootstrap,
                          "--alter", "--entity-type", "users", "--entity-name", user, "--add-config",
                          f"{mechanism}=[iterations={iterations},password={password}]"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"samsa configs failed: {out.stdout}\n{out.stderr}")
