"""Certificates for test TLS listeners: a CA, a server certificate and a client certificate.

They pass OpenSSL's strict verification (``VERIFY_X509_STRICT``, on by default in Python 3.13's
``ssl.create_default_context``), which wants on every certificate a Subject Key Identifier and,
below the root, an Authority Key Identifier naming the issuer's; on the CA a critical
BasicConstraints(ca=True) and a KeyUsage with keyCertSign; on the leaves BasicConstraints
(ca=False), a KeyUsage fit for their key (an EC key signs: digitalSignature) and an
ExtendedKeyUsage (serverAuth / clientAuth). The server certificate names ``localhost`` and the
listener's address in its SubjectAlternativeName, which is what hostname checks read.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_OIDS = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "O": NameOID.ORGANIZATION_NAME}


def name(**parts: str) -> x509.Name:
    """``name(CN="alice", OU="eng", O="Samsa")`` -> the X.509 name Kafka prints as CN=alice,OU=eng,O=Samsa."""
    return x509.Name([x509.NameAttribute(_OIDS[k], v) for k, v in reversed(list(parts.items()))])


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def certificate(subject: x509.Name, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
                issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool = False, server: bool = False,
                client: bool = False, hosts: tuple[str, ...] = (), days: int = 30) -> x509.Certificate:
    """A certificate that passes VERIFY_X509_STRICT (see the module docstring)."""
    now = datetime.datetime.now(datetime.UTC)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=days))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
         .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
         .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                      data_encipherment=False, key_agreement=False, key_cert_sign=ca,
                                      crl_sign=ca, encipher_only=False, decipher_only=False), critical=True))
    if issuer_key is not key:  # below the root: name the issuer's key
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                            critical=False)
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
    if usages:
        b = b.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if hosts:
        sans: list[x509.GeneralName] = []
        for h in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(h)))
            except ValueError:
                sans.append(x509.DNSName(h))
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class TlsMaterial:
    """Files for an embedded broker's SSL listener and its clients.

    ``ca_file``: the CA to trust (``ssl_cafile`` / ``ssl.ca.location``); ``client_cert_file`` and
    ``client_key_file``: a client certificate (CN=client) for mutual TLS.
    """

    dir: Path
    ca_file: Path
    server_pem: Path
    client_cert_file: Path
    client_key_file: Path
    broker_properties: dict[str, str] = field(default_factory=dict)


def broker_tls_properties(d: Path, host: str = "127.0.0.1") -> TlsMaterial:
    """Write a CA, a server keystore (PEM) and a client certificate to ``d``; return the files and
    the broker properties of an SSL listener using them."""
    d.mkdir(parents=True, exist_ok=True)
    ca_key, srv_key, cli_key = new_key(), new_key(), new_key()
    ca_name = name(CN="Samsa Test CA", O="Samsa")
    ca = certificate(ca_name, ca_key, ca_name, ca_key, ca=True)
    hosts = tuple(dict.fromkeys(("localhost", "127.0.0.1", host)))
    srv = certificate(name(CN="localhost", O="Samsa"), srv_key, ca_name, ca_key, server=True, client=True,
                      hosts=hosts)  # a broker presents it as a client too (inter-broker mTLS)
    cli = certificate(name(CN="client", O="Samsa"), cli_key, ca_name, ca_key, client=True)
    m = TlsMaterial(d, d / "ca.pem", d / "server.pem", d / "client.crt", d / "client.key")
    m.ca_file.write_bytes(pem_cert(ca))
    m.server_pem.write_bytes(pem_key(srv_key) + pem_cert(srv) + pem_cert(ca))
    m.client_cert_file.write_bytes(pem_cert(cli))
    m.client_key_file.write_bytes(pem_key(cli_key))
    m.broker_properties = {
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(m.server_pem),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(m.ca_file),
    }
    return m
