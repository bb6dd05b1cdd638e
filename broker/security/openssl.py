"""``SSL_CTX_set_ciphersuites``, which Python's ``ssl`` module does not offer, made through ``ctypes``.

Python's ``SSLContext.set_ciphers`` only reaches TLS 1.2 suites, while Kafka's ``ssl.cipher.suites``
names TLS 1.3 suites too (``TLS_AES_256_GCM_SHA384``...). The listener's ``ssl.SSLContext`` is
where tls.py validates the settings (and what ``ssl.transport=loop`` serves with);
openssl_transport.py mirrors the suites it ends up with.

It needs the context's ``SSL_CTX`` pointer, which Python does not expose. It is read from
CPython's ``SSLContext`` object, where it is the first field after the object header on every
CPython from 3.7 to 3.13, and is trusted only after OpenSSL, asked for that context's options,
answers what ``SSLContext.options`` says. The library is the one ``_ssl`` uses: loaded by its
soname and accepted only when its version number is ``ssl.OPENSSL_VERSION_NUMBER``. Where any of
that fails (another interpreter, another libssl, a layout that does not check out) the helpers
answer None and touch nothing; callers say so instead of guessing.
"""

from __future__ import annotations

import ctypes
import ssl
import sys
from typing import Any

_libssl: Any = None  # None: not loaded yet; False: not usable here


def _load_libssl() -> Any:
    """The libssl that Python's ``_ssl`` uses, or None when it cannot be identified."""
    global _libssl
    if _libssl is not None:
        return _libssl or None
    _libssl = False
    if sys.implementation.name != "cpython" or not ((3, 7) <= sys.version_info[:2] <= (3, 13)):
        return None
    try:
        lib = ctypes.CDLL(f"libssl.so.{ssl.OPENSSL_VERSION_INFO[0]}")
        lib.OpenSSL_version_num.restype = ctypes.c_ulong
        if lib.OpenSSL_version_num() != ssl.OPENSSL_VERSION_NUMBER:
            return None  # a different libssl than the one _ssl was built against
        lib.SSL_CTX_get_options.argtypes = [ctypes.c_void_p]
        lib.SSL_CTX_get_options.restype = ctypes.c_uint64
        lib.SSL_CTX_set_ciphersuites.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.SSL_CTX_set_ciphersuites.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    _libssl = lib
    return lib


def _ctx_pointer(ctx: ssl.SSLContext) -> tuple[Any, int] | None:
    """(libssl, the context's SSL_CTX pointer), or None where that cannot be had safely."""
    lib = _load_libssl()
    if lib is None:
        return None
    ptr = ctypes.c_void_p.from_address(id(ctx) + object.__basicsize__).value
    if not ptr or lib.SSL_CTX_get_options(ptr) != int(ctx.options):
        return None
    return lib, ptr


def set_tls13_ciphersuites(ctx: ssl.SSLContext, names: list[str]) -> bool | None:
    """True if OpenSSL took the TLS 1.3 suite list, False if it refused it, None if it cannot be set here."""
    got = _ctx_pointer(ctx)
    if got is None:
        return None
    lib, ptr = got
    return bool(lib.SSL_CTX_set_ciphersuites(ptr, ":".join(names).encode()))

