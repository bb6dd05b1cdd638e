"""Generated certificates pass OpenSSL's strict verification (Python 3.13's default).

Python 3.13's ``ssl.create_default_context()`` sets ``VERIFY_X509_STRICT``; certificates without
key identifiers or key usage then fail with "certificate unknown" (issue 29: 28 TLS tests on
3.13). Here the flag is set explicitly, so the check holds on every Python the package claims,
through a real TLS handshake (in memory, both directions verified).
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from broker.testing.certs import broker_tls_properties
from tests.support.security import make_pki


def _handshake(server_pem: Path, ca: Path, client_cert: tuple[Path, Path] | None) -> str:
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(server_pem))
    client = ssl.create_default_context(cafile=str(ca))
    client.verify_flags |= ssl.VERIFY_X509_STRICT
    if client_cert is not None:
        server.load_verify_locations(str(ca))
        server.verify_mode = ssl.CERT_REQUIRED
        server.verify_flags |= ssl.VERIFY_X509_STRICT
        client.load_cert_chain(str(client_cert[0]), str(client_cert[1]))
    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    s = server.wrap_bio(s_in, s_out, server_side=True)
    c = client.wrap_bio(c_in, c_out, server_hostname="localhost")
    for _ in range(20):
        done = 0
        for side, out, peer_in in ((c, c_out, s_in), (s, s_out, c_in)):
            try:
                side.do_handshake()
                done += 1
            except ssl.SSLWantReadError:
                pass
            data = out.read()
            if data:
                peer_in.write(data)
        if done == 2:
            break
    peer = s.getpeercert()
    return dict(x[0] for x in peer["subject"])["commonName"] if peer else ""


def test_embedded_broker_certificates_pass_strict_verification(tmp_path: Path) -> None:
    m = broker_tls_properties(tmp_path)
    assert _handshake(m.server_pem, m.ca_file, None) == ""
    assert _handshake(m.server_pem, m.ca_file, (m.client_cert_file, m.client_key_file)) == "client"


def test_test_suite_pki_passes_strict_verification(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    assert _handshake(pki.server_pem, pki.ca, (pki.client_crt, pki.client_key)) == "alice"


def test_a_certificate_without_key_identifiers_is_refused(tmp_path: Path) -> None:
    """The check can fail: a CA as tests/support/security.py made it before (basic constraints only)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    from broker.testing import certs

    key = certs.new_key()
    name = certs.name(CN="old CA")
    now = datetime.datetime.now(datetime.UTC)
    ca = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
          .serial_number(1).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(key, hashes.SHA256()))
    srv_key = certs.new_key()
    srv = certs.certificate(certs.name(CN="localhost"), srv_key, name, key, server=True, hosts=("localhost",))
    (tmp_path / "ca.pem").write_bytes(certs.pem_cert(ca))
    (tmp_path / "server.pem").write_bytes(certs.pem_key(srv_key) + certs.pem_cert(srv) + certs.pem_cert(ca))
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(tmp_path / "server.pem", tmp_path / "ca.pem", None)
