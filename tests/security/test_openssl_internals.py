"""The private parts of other libraries that Samsa relies on, checked (broker/security/openssl.py).

Each test fails with a message naming the library, its version and the part that changed, so an
upgrade that breaks one says so here instead of as a slower broker or a refused setting
elsewhere; pyproject.toml states the versions these were checked on beside the pins. The last
test keeps every such reach in that one module.
"""

from __future__ import annotations

import re
from pathlib import Path

from broker.security import openssl, openssl_transport

ROOT = Path(__file__).resolve().parents[2]


def test_cpython_sslcontext_gives_its_ssl_ctx_for_tls13_suites() -> None:
    """(1) ssl.SSLContext starts with its SSL_CTX *; SSL_CTX_set_ciphersuites through it takes."""
    problem = openssl.cpython_problem()
    assert problem is None, problem


def test_pyopenssl_binding_and_connection_fields_are_what_the_data_path_uses() -> None:
    """(2) OpenSSL._util.ffi/lib carry the functions the TLS data path calls; a Connection's _ssl,
    _into_ssl and _from_ssl are its SSL * and its read and write BIOs."""
    problem = openssl.pyopenssl_problem()
    assert problem is None, problem
    assert openssl.PYOPENSSL and openssl_transport.AVAILABLE


def test_cryptography_raw_binding_gives_callable_function_addresses() -> None:
    """(3) cryptography's raw cffi Lib is pyOpenSSL's binding, and its addresses call the functions
    (what the C read loop is bound to)."""
    problem = openssl.cryptography_problem()
    assert problem is None, problem


# What reaching into those private parts looks like in source.
_PRIVATE = re.compile(r"OpenSSL\._util|OpenSSL import _util|bindings\._rust|\._into_ssl\b|\._from_ssl\b|"
                      r"\bconn\._ssl\b|from_address\(id\(|object\.__basicsize__")


def test_only_openssl_py_reaches_into_those_private_parts() -> None:
    found = []
    for package in ("protocol", "log", "txn", "groupcoord", "broker", "spark"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == "broker/security/openssl.py":
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("#", 1)[0]
                if _PRIVATE.search(code):
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "private parts of ssl/pyOpenSSL/cryptography reached outside broker/security/openssl.py " \
                      "(convention 18: confine them there):\n" + "\n".join(found)
