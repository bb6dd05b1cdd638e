"""Every reach into another library's private parts that Samsa makes, in this one module.

Three libraries are used here below their public API, each because that API has nothing for what
is needed; nothing else in Samsa may do so (``broker/security/openssl_transport.py`` and
``tls.py`` use only what this module exports). Each reliance is checked where it is first used,
which degrades to a stated fallback instead of guessing, and by
``tests/security/test_openssl_internals.py``, which fails naming the library and the part that
changed. ``pyproject.toml`` states the versions checked beside the pins of these dependencies.

1. **CPython's** ``ssl.SSLContext``: its ``SSL_CTX *``, to call ``SSL_CTX_set_ciphersuites``
   (:func:`set_tls13_ciphersuites`). ``SSLContext.set_ciphers`` reaches only TLS 1.2 suites, while
   Kafka's ``ssl.cipher.suites`` names TLS 1.3 suites too (``TLS_AES_256_GCM_SHA384``...). The
   pointer is the first field after the object header on every CPython from 3.7 to 3.13, and is
   trusted only after OpenSSL, asked for that context's options, answers what
   ``SSLContext.options`` says. The library called is the one ``_ssl`` uses: loaded by its soname
   (ctypes) and accepted only when its version number is ``ssl.OPENSSL_VERSION_NUMBER``. Where
   any of that fails (another interpreter, another libssl, a layout that does not check out) the
   call answers None and touches nothing; tls.py then refuses the setting with a clear message.
2. **pyOpenSSL**: ``OpenSSL._util.ffi``/``lib`` (cryptography's cffi binding of the OpenSSL in
   its wheel, as pyOpenSSL holds it: :data:`ffi`, :data:`lib`) and a ``Connection``'s ``_ssl``,
   ``_into_ssl`` and ``_from_ssl`` (:func:`connection_handles`). The TLS data path calls
   ``SSL_read``/``SSL_write`` on the connection's ``SSL *`` and swaps its read BIO for a read-only
   one over the receive buffer; pyOpenSSL's public ``recv_into``/``bio_write`` copy every byte
   once more through a buffer of their own, which is what the transport exists to avoid.
3. **cryptography**: ``cryptography.hazmat.bindings._rust._openssl``, the binding's raw cffi
   ``Lib``, whose functions have addresses (pyOpenSSL's ``lib`` is a wrapper module that has
   none): the optional C read loop (``_tlsread.c``) calls ``SSL_read`` and ``SSL_get_error``
   through them (:func:`c_read_loop`).

Where pyOpenSSL or the binding lacks what is relied on, :data:`PYOPENSSL` is False and listeners
serve TLS with the event loop's ``ssl`` (``ssl.transport=loop``); where only the raw ``Lib`` or the
extension is missing, connections read with the Python loop.
"""

from __future__ import annotations

import ctypes
import ssl
import sys
from collections.abc import Callable
from importlib import metadata
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cffi import FFI  # untyped library: FFI, FFI.CData name what a reader sees, mypy checks nothing
    from typing_extensions import Buffer  # collections.abc.Buffer from Python 3.12

from OpenSSL import SSL

try:
    from OpenSSL._util import ffi as _pyopenssl_ffi  # (2) above
    from OpenSSL._util import lib as _pyopenssl_lib

    HAVE_BINDING = True
except ImportError:  # pragma: no cover - a pyOpenSSL that moved it: the loop's TLS serves (PYOPENSSL False)
    HAVE_BINDING = False

try:
    from cryptography.hazmat.bindings._rust import _openssl as _raw_binding  # (3) above

    HAVE_RAW_BINDING = True
except ImportError:  # pragma: no cover - a cryptography that moved it: the Python read loop serves
    HAVE_RAW_BINDING = False

try:
    from ._tlsread import bind as _tlsread_bind  # the optional C extension (setup.py builds it where it can)
    from ._tlsread import read_into as _tlsread_read_into

    HAVE_C_READ_LOOP = True
except ImportError:
    HAVE_C_READ_LOOP = False

# --- (1) CPython's SSLContext ----------------------------------------------------------------

CPYTHON_CHECKED = ((3, 7), (3, 13))  # CPython versions whose SSLContext starts with its SSL_CTX *


class _LibSsl:
    """The libssl that Python's ``_ssl`` uses, loaded on first use (None where it cannot be identified)."""

    loaded = False
    lib: ctypes.CDLL | None = None

    @classmethod
    def get(cls) -> ctypes.CDLL | None:
        if not cls.loaded:
            cls.loaded = True
            cls.lib = cls._load()
        return cls.lib

    @staticmethod
    def _load() -> ctypes.CDLL | None:
        low, high = CPYTHON_CHECKED
        if sys.implementation.name != "cpython" or not (low <= sys.version_info[:2] <= high):
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
        return lib


def _ctx_pointer(ctx: ssl.SSLContext) -> tuple[ctypes.CDLL, int] | None:
    """(libssl, the context's SSL_CTX pointer), or None where that cannot be had safely."""
    lib = _LibSsl.get()
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


# --- (2) pyOpenSSL's binding and connection internals -----------------------------------------

# What the TLS data path calls through the binding (openssl_transport.py): all present, or PYOPENSSL False.
FUNCTIONS = ("SSL_read", "SSL_write", "SSL_get_error", "SSL_shutdown", "SSL_set_bio", "ERR_clear_error",
             "BIO_new", "BIO_s_mem", "BIO_new_mem_buf", "BIO_write", "BIO_read", "BIO_get_mem_data",
             "BIO_set_mem_eof_return", "SSL_ERROR_WANT_READ", "SSL_ERROR_ZERO_RETURN")
CONNECTION_FIELDS = ("_ssl", "_into_ssl", "_from_ssl")  # SSL *, its read BIO, its write BIO



def pyopenssl_problem() -> str | None:
    """What of (2) does not hold with the pyOpenSSL installed (None: all of it holds). A client
    connection starts a handshake: its ClientHello must be in ``_from_ssl``, bytes given to the
    public ``bio_write`` must land in ``_into_ssl``, and ``_ssl`` must be the ``SSL *`` that
    ``SSL_get_error`` answers WANT_READ for."""
    where = f"pyOpenSSL {_version('pyOpenSSL')}"
    if not HAVE_BINDING:
        return f"{where}: OpenSSL._util.ffi/lib (cryptography's binding as pyOpenSSL holds it) are gone"
    missing = [n for n in FUNCTIONS if not hasattr(_pyopenssl_lib, n)]
    if missing:
        return f"{where}: the binding in OpenSSL._util.lib no longer has {', '.join(missing)}"
    conn = SSL.Connection(SSL.Context(SSL.TLS_CLIENT_METHOD), None)
    absent = [f for f in CONNECTION_FIELDS if not hasattr(conn, f)]
    if absent:
        return f"{where}: SSL.Connection no longer has the private fields {', '.join(absent)}"
    ssl_, rbio, wbio = connection_handles(conn)
    try:
        types = [_pyopenssl_ffi.getctype(_pyopenssl_ffi.typeof(x)) for x in (ssl_, rbio, wbio)]
    except TypeError:
        types = []
    if types != ["SSL *", "BIO *", "BIO *"]:
        return f"{where}: SSL.Connection's _ssl/_into_ssl/_from_ssl are no longer SSL * and two BIO * ({types})"
    conn.set_connect_state()
    try:
        conn.do_handshake()
    except SSL.WantReadError:
        pass
    hello = _pyopenssl_lib.BIO_get_mem_data(wbio, _pyopenssl_ffi.NULL)
    if hello <= 0 or len(conn.bio_read(65536)) != hello:
        return f"{where}: SSL.Connection._from_ssl is no longer the BIO the connection writes to"
    if _pyopenssl_lib.SSL_get_error(ssl_, -1) != _pyopenssl_lib.SSL_ERROR_WANT_READ:
        return f"{where}: SSL.Connection._ssl is no longer the connection's SSL *"
    conn.bio_write(b"\x16\x03\x03")
    if _pyopenssl_lib.BIO_get_mem_data(rbio, _pyopenssl_ffi.NULL) != 3:
        return f"{where}: SSL.Connection._into_ssl is no longer the BIO the connection reads from"
    return None


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "(not installed)"


# cffi's FFI of the binding (new, cast, from_buffer, buffer, NULL: public cffi API) and the OpenSSL
# functions in FUNCTIONS; where the binding is missing, PYOPENSSL is False and neither is used.
ffi: FFI = _pyopenssl_ffi if HAVE_BINDING else None
lib: ModuleType = _pyopenssl_lib if HAVE_BINDING else ModuleType("OpenSSL binding (missing)")


def connection_handles(conn: SSL.Connection) -> tuple[FFI.CData, FFI.CData, FFI.CData]:
    """(``SSL *``, read BIO, write BIO) of a pyOpenSSL connection made with memory BIOs (socket None)."""
    return conn._ssl, conn._into_ssl, conn._from_ssl


def retire_read_bio(conn: SSL.Connection) -> None:
    """Tell pyOpenSSL that the read BIO it made is gone (SSL_set_bio with another one freed it),
    so none of its methods can touch freed memory."""
    conn._into_ssl = None


PYOPENSSL = pyopenssl_problem() is None  # False: listeners serve TLS on the event loop's ssl


# --- (3) cryptography's raw binding, for the C read loop -------------------------------------

ReadInto = Callable[[int, "Buffer"], "tuple[int, int]"]  # (SSL * address, buffer) -> (read, SSL error or 0)


def function_address(name: str) -> int:
    """The address of an OpenSSL function of cryptography's wheel (raises AttributeError if absent)."""
    if not HAVE_RAW_BINDING:
        raise AttributeError(f"cryptography.hazmat.bindings._rust._openssl is missing, so is {name}")
    return int(_raw_binding.ffi.cast("uintptr_t", _raw_binding.ffi.addressof(_raw_binding.lib, name)))


def c_read_loop() -> ReadInto | None:
    """``_tlsread.read_into`` bound to this OpenSSL's ``SSL_read``/``SSL_get_error``, or None (the
    extension not built, or a binding that does not give the addresses, or not the one pyOpenSSL uses)."""
    if not (PYOPENSSL and HAVE_C_READ_LOOP and HAVE_RAW_BINDING) or _raw_binding.ffi is not ffi:
        return None
    try:
        _tlsread_bind(function_address("SSL_read"), function_address("SSL_get_error"))
    except (AttributeError, TypeError):
        return None
    return _tlsread_read_into


def address(ptr: FFI.CData) -> int:
    """A pointer of the binding as an integer (what the C read loop takes)."""
    return int(ffi.cast("uintptr_t", ptr))


# --- the checks tests/security/test_openssl_internals.py runs -----------------------------------

def cpython_problem() -> str | None:
    """What of (1) does not hold on this interpreter (None: it holds)."""
    where = f"{sys.implementation.name} {sys.version.split()[0]} with {ssl.OPENSSL_VERSION}"
    low, high = CPYTHON_CHECKED
    if sys.implementation.name != "cpython" or not (low <= sys.version_info[:2] <= high):
        return (f"{where}: ssl.SSLContext's layout (its SSL_CTX * first after the object header) was checked "
                f"on CPython {low[0]}.{low[1]}-{high[0]}.{high[1]} only; check it here and widen CPYTHON_CHECKED")
    if _LibSsl.get() is None:
        return f"{where}: libssl.so.{ssl.OPENSSL_VERSION_INFO[0]} cannot be loaded, or is not the libssl _ssl uses"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if _ctx_pointer(ctx) is None:
        return f"{where}: ssl.SSLContext no longer starts with its SSL_CTX * (OpenSSL's options do not match)"
    if set_tls13_ciphersuites(ctx, ["TLS_CHACHA20_POLY1305_SHA256"]) is not True:
        return f"{where}: SSL_CTX_set_ciphersuites refused a TLS 1.3 suite through ssl.SSLContext's SSL_CTX *"
    tls13 = [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.3"]
    if tls13 != ["TLS_CHACHA20_POLY1305_SHA256"]:
        return f"{where}: the TLS 1.3 suites set through ssl.SSLContext's SSL_CTX * did not take ({tls13})"
    return None


def cryptography_problem() -> str | None:
    """What of (3) does not hold with the cryptography installed (None: it holds): the raw binding
    is there, is the one pyOpenSSL uses, and its function addresses call the functions."""
    where = f"cryptography {_version('cryptography')}"
    if not HAVE_RAW_BINDING:
        return f"{where}: cryptography.hazmat.bindings._rust._openssl (the raw cffi binding) is gone"
    if _raw_binding.ffi is not ffi:
        return f"{where}: cryptography.hazmat.bindings._rust._openssl is not the binding pyOpenSSL uses"
    try:
        get_error = _raw_binding.ffi.cast("int (*)(const SSL *, int)", function_address("SSL_get_error"))
        function_address("SSL_read")
    except AttributeError as e:
        return f"{where}: the raw binding has no address for an OpenSSL function the C read loop calls ({e})"
    conn = SSL.Connection(SSL.Context(SSL.TLS_CLIENT_METHOD), None)
    conn.set_connect_state()
    try:
        conn.do_handshake()
    except SSL.WantReadError:
        pass
    if get_error(connection_handles(conn)[0], -1) != lib.SSL_ERROR_WANT_READ:
        return f"{where}: SSL_get_error called through the raw binding's address does not answer as the binding does"
    return None
