"""TLS for SSL and SASL_SSL listeners: Kafka's ``ssl.*`` settings onto Python's ``ssl``.

* Keystore: ``ssl.keystore.type`` PEM or PKCS12 (when unset, the type is taken from the file:
  Samsa has no JKS, Kafka's default). PEM from ``ssl.keystore.location`` (certificate chain and
  private key in one file) or inline ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``;
  ``ssl.key.password`` decrypts the key, ``ssl.keystore.password`` opens a PKCS12 file (read
  with ``cryptography``).
* Truststore (to verify client certificates): ``ssl.truststore.location`` (PEM or PKCS12) or
  inline ``ssl.truststore.certificates``.
* ``ssl.client.auth`` none | requested | required -> CERT_NONE | CERT_OPTIONAL | CERT_REQUIRED;
  ``ssl.enabled.protocols`` (TLSv1.2,TLSv1.3 by default) bounds the versions;
  ``ssl.cipher.suites`` takes OpenSSL names or Kafka's (IANA) names, TLS 1.2 and TLS 1.3 suites
  (``SSL_CTX_set_ciphersuites`` through broker/security/openssl.py, which Python's ``ssl``
  lacks); a version none of the listed suites belongs to is not offered, as in Kafka's JDK.
* The principal of a client that presented a certificate is its subject DN in RFC 2253 form
  (``CN=alice,OU=eng,O=Samsa``), rewritten by ``ssl.principal.mapping.rules``
  (``RULE:pattern/replacement/[LU],DEFAULT``; the first rule whose pattern matches the whole DN
  wins; DEFAULT keeps the DN).

The ``ssl.SSLContext`` built here is where every setting is checked; connections are served on
a mirror of it in OpenSSL 4.0 (broker/security/openssl_transport.py), or on it directly with
``ssl.transport=loop``.

Key material never touches the disk in clear: PKCS12 and inline keys are re-encrypted with a
one-off passphrase into a private temporary file that is removed as soon as OpenSSL has read it.
Every failure raises :class:`SecurityConfigError` naming the listener, the setting and the cause.
"""

from __future__ import annotations

import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from cryptography import x509
from cryptography.hazmat.primitives import serialization as ser
from cryptography.hazmat.primitives.serialization import pkcs12

from .errors import SecurityConfigError
from .openssl import set_tls13_ciphersuites
from .principal import MappingRule

if TYPE_CHECKING:
    from .listeners import ListenerConfig

_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}

@contextmanager
def private_file(data: bytes) -> Iterator[str]:
    fd, path = tempfile.mkstemp(prefix="samsa-tls-", suffix=".pem")
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
        os.close(fd)
        yield path
    finally:
        os.unlink(path)


def _read(lc: ListenerConfig, setting: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise SecurityConfigError(f"Listener {lc.name}: cannot read {setting} {path}: {e.strerror}") from None


def _store_type(lc: ListenerConfig, kind: str, data: bytes) -> str:
    t = (lc.get(f"ssl.{kind}.type") or "").upper()
    if not t:
        t = "PEM" if b"-----BEGIN" in data else "PKCS12"
    if t not in ("PEM", "PKCS12"):
        raise SecurityConfigError(f"Listener {lc.name}: ssl.{kind}.type {t} is not supported (use PEM or PKCS12)")
    return t


def _pkcs12(lc: ListenerConfig, kind: str, data: bytes) -> tuple[object, object, list[object]]:
    pw = lc.get(f"ssl.{kind}.password")
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(data, pw.encode() if pw else None)
    except (ValueError, TypeError) as e:
        raise SecurityConfigError(f"Listener {lc.name}: cannot open the PKCS12 {kind} "
                                  f"(wrong ssl.{kind}.password or not PKCS12): {e}") from None
    return key, cert, list(extra)


def keystore_pem(lc: ListenerConfig) -> tuple[bytes, str | None, str]:
    """The listener's certificate chain and private key as PEM, the key's password, and which
    settings they came from (for messages). A PKCS12 keystore is converted with its key encrypted
    under a one-off passphrase, so the temporary file OpenSSL reads never holds it in clear."""
    location = lc.get("ssl.keystore.location")
    chain, key = lc.get("ssl.keystore.certificate.chain"), lc.get("ssl.keystore.key")
    key_pw = lc.get("ssl.key.password")
    if location:
        data = _read(lc, "ssl.keystore.location", location)
        if _store_type(lc, "keystore", data) == "PEM":
            return data, key_pw, f"ssl.keystore.location {location}"
        pkey, cert, extra = _pkcs12(lc, "keystore", data)
        if pkey is None or cert is None:
            raise SecurityConfigError(f"Listener {lc.name}: the PKCS12 keystore {location} holds no private key "
                                      "and certificate")
        phrase = secrets.token_hex(16)
        pem = pkey.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8,  # type: ignore[attr-defined]
                                 ser.BestAvailableEncryption(phrase.encode()))
        pem += b"".join(c.public_bytes(ser.Encoding.PEM) for c in [cert, *extra])  # type: ignore[attr-defined]
        return pem, phrase, f"ssl.keystore.location {location}"
    if chain and key:
        return ((key.strip() + "\n" + chain.strip() + "\n").encode(), key_pw,
                "ssl.keystore.certificate.chain/ssl.keystore.key")
    raise SecurityConfigError(f"Listener {lc.name} ({lc.security_protocol.value}) needs a keystore: set "
                              f"{lc.prefix}ssl.keystore.location or ssl.keystore.certificate.chain and "
                              "ssl.keystore.key")


def load_keystore(ctx: ssl.SSLContext, lc: ListenerConfig) -> None:
    _load_chain(ctx, lc, *keystore_pem(lc))


def _load_chain(ctx: ssl.SSLContext, lc: ListenerConfig, pem: bytes, password: str | None, what: str) -> None:
    if b"PRIVATE KEY-----" not in pem or b"CERTIFICATE-----" not in pem:
        raise SecurityConfigError(f"Listener {lc.name}: {what} must hold a PEM certificate chain and private key")
    with private_file(pem) as path:
        try:
            ctx.load_cert_chain(path, password=password or None)
        except ssl.SSLError as e:
            raise SecurityConfigError(f"Listener {lc.name}: invalid certificate or key in {what} "
                                      f"({e.reason or e}); check the file and ssl.key.password") from None


def load_truststore(ctx: ssl.SSLContext, lc: ListenerConfig) -> bool:
    location = lc.get("ssl.truststore.location")
    inline = lc.get("ssl.truststore.certificates")
    if location:
        data = _read(lc, "ssl.truststore.location", location)
        if _store_type(lc, "truststore", data) == "PKCS12":
            _key, cert, extra = _pkcs12(lc, "truststore", data)
            certs = [c for c in [cert, *extra] if c is not None]
            data = b"".join(c.public_bytes(ser.Encoding.PEM) for c in certs)  # type: ignore[attr-defined]
        what = f"ssl.truststore.location {location}"
    elif inline:
        data, what = inline.encode(), "ssl.truststore.certificates"
    else:
        return False
    try:
        ctx.load_verify_locations(cadata=data.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError) as e:
        raise SecurityConfigError(f"Listener {lc.name}: invalid CA certificates in {what} ({e})") from None
    return True


def iana_to_openssl(name: str) -> str:
    """TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 -> ECDHE-RSA-AES128-GCM-SHA256 (TLS 1.2 suites)."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kx, cipher = name[4:].split("_WITH_", 1)
    cipher = re.sub(r"AES_(\d+)", r"AES\1", cipher).replace("CHACHA20_POLY1305", "CHACHA20-POLY1305")
    kx = {"RSA": ""}.get(kx, kx)
    out = "-".join(p for p in (kx.replace("_", "-"), cipher.replace("_", "-")) if p)
    return out.replace("AES128-CBC-SHA", "AES128-SHA").replace("AES256-CBC-SHA", "AES256-SHA")


def _restrict_suites(ctx: ssl.SSLContext, listener: str, suites: list[str]) -> None:
    """Enable only the listed suites, as Kafka's ``ssl.cipher.suites`` does for both TLS versions.

    TLS 1.3 suites (``TLS_AES_256_GCM_SHA384``...) go to ``SSL_CTX_set_ciphersuites``, the rest to
    ``set_ciphers``. A version left without a listed suite is switched off, as the JDK does when no
    enabled suite fits a protocol: only TLS 1.3 suites listed means TLS 1.3 only, and the reverse."""
    tls13 = [s for s in suites if re.fullmatch(r"TLS_(AES|CHACHA20)_\w+", s)]
    tls12 = [iana_to_openssl(s) for s in suites if s not in tls13]
    unavailable = SecurityConfigError(f"Listener {listener}: none of ssl.cipher.suites {suites} is available "
                                      f"for ssl.enabled.protocols")
    if tls12:
        try:
            ctx.set_ciphers(":".join(tls12))
        except ssl.SSLError:
            raise unavailable from None
    if tls13:
        done = set_tls13_ciphersuites(ctx, tls13)
        if done is None:
            raise SecurityConfigError(f"Listener {listener}: TLS 1.3 suites in ssl.cipher.suites ({', '.join(tls13)}) "
                                      "cannot be set with this Python's ssl module")
        if not done:
            raise SecurityConfigError(f"Listener {listener}: unknown TLS 1.3 suite in ssl.cipher.suites {tls13}")
    try:
        if not tls12:
            ctx.minimum_version = max(ctx.minimum_version, ssl.TLSVersion.TLSv1_3)
        if not tls13:
            ctx.maximum_version = min(ctx.maximum_version, ssl.TLSVersion.TLSv1_2)
    except ValueError:
        raise unavailable from None
    if ctx.minimum_version > ctx.maximum_version:
        raise unavailable


def build_server_context(lc: ListenerConfig) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    protos = [p.strip() for p in (lc.get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3") or "").split(",") if p.strip()]
    bad = [p for p in protos if p not in _VERSIONS]
    if bad or not protos:
        raise SecurityConfigError(f"Listener {lc.name}: unsupported ssl.enabled.protocols {bad or protos} "
                                  f"(supported: {', '.join(_VERSIONS)})")
    versions = sorted(_VERSIONS[p] for p in protos)
    try:
        ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    except ValueError as e:
        raise SecurityConfigError(f"Listener {lc.name}: ssl.enabled.protocols {protos}: {e}") from None
    suites = [s.strip() for s in (lc.get("ssl.cipher.suites") or "").split(",") if s.strip()]
    if suites:
        _restrict_suites(ctx, lc.name, suites)
    load_keystore(ctx, lc)
    mode = (lc.get("ssl.client.auth", "none") or "none").lower()
    if mode not in CLIENT_AUTH:
        raise SecurityConfigError(f"Listener {lc.name}: invalid ssl.client.auth {mode!r} "
                                  "(none, requested or required)")
    has_trust = load_truststore(ctx, lc)
    if mode != "none" and not has_trust:
        raise SecurityConfigError(f"Listener {lc.name}: ssl.client.auth={mode} needs a truststore "
                                  "(ssl.truststore.location or ssl.truststore.certificates)")
    ctx.verify_mode = CLIENT_AUTH[mode]
    return ctx


def client_context(lc: ListenerConfig) -> ssl.SSLContext:
    """The context this broker connects to other brokers with on the inter-broker listener ``lc``."""
    ctx = ssl.create_default_context()
    if not load_truststore(ctx, lc):
        ctx.load_default_certs()
    ctx.check_hostname = (lc.get("ssl.endpoint.identification.algorithm", "https") or "") != ""
    if (lc.get("ssl.client.auth", "none") or "none").lower() != "none":
        load_keystore(ctx, lc)
    return ctx


# --- principals from certificates (the mapping rules are in principal.py) --------------------------


def peer_principal(ssl_object: ssl.SSLObject | ssl.SSLSocket | None, rules: list[MappingRule]) -> str:
    """``User:<mapped DN>`` for a client certificate, ``User:ANONYMOUS`` without one."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return "User:ANONYMOUS"
    dn = x509.load_der_x509_certificate(der).subject.rfc4514_string()
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return f"User:{name}"
    raise SecurityConfigError(f"No ssl.principal.mapping.rules rule matches the client certificate DN {dn}")
