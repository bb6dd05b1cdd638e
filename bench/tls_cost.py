#!/usr/bin/env python3
"""What TLS costs the broker per MB, without sockets: Python's ``ssl`` over memory BIOs.

A server and a client ``SSLObject`` (the test CA's certificate, the negotiated TLS 1.3 suite)
handshake over ``MemoryBIO``s, as asyncio's and uvloop's SSL transports do; then 50 MB are
encrypted in writes of 16 KiB, 64 KiB and 1 MiB and decrypted with ``read(256 KiB)`` (uvloop's
copied path) and ``read(n, buffer)`` (its buffered path). Printed: milliseconds per MB. Compare
with ``openssl speed -evp aes-256-gcm`` on the same machine: the difference is the record layer
as Python's ``ssl`` drives it, which bench/security.py's broker CPU per MB over SSL reflects.

Usage::

    python bench/tls_cost.py
"""

from __future__ import annotations

import ssl
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.security import make_pki  # noqa: E402

TOTAL = 50 << 20


def pair(tmp: Path) -> tuple[ssl.SSLObject, ssl.SSLObject, list[ssl.MemoryBIO]]:
    pki = make_pki(tmp / "pki")
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(str(pki.server_pem))
    cctx = ssl.create_default_context(cafile=str(pki.ca))
    bios = [ssl.MemoryBIO() for _ in range(4)]  # server in/out, client in/out
    s = sctx.wrap_bio(bios[0], bios[1], server_side=True)
    c = cctx.wrap_bio(bios[2], bios[3], server_hostname="localhost")
    for _ in range(10):
        for obj in (c, s):
            try:
                obj.do_handshake()
            except ssl.SSLWantReadError:
                pass
        if bios[3].pending:
            bios[0].write(bios[3].read())
        if bios[1].pending:
            bios[2].write(bios[1].read())
    return s, c, bios


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        s, c, (s_in, _s_out, _c_in, c_out) = pair(Path(d))
        print(f"suite {s.cipher()[0]}, {ssl.OPENSSL_VERSION}")
        buf = bytearray(256 * 1024)
        for chunk in (16384, 65536, 1 << 20):
            data = b"x" * chunk
            enc: list[float] = []
            dec = {}
            for mode in ("read(256 KiB)", "read(n, buffer)"):  # records decrypt once: encrypt for each
                encrypted = []
                t0 = time.perf_counter()
                for _ in range(TOTAL // chunk):
                    c.write(data)
                    encrypted.append(c_out.read())
                enc.append((time.perf_counter() - t0) * 1000 / (TOTAL >> 20))
                t0 = time.perf_counter()
                for e in encrypted:
                    s_in.write(e)
                    while True:
                        try:
                            if mode == "read(n, buffer)":
                                s.read(len(buf), buf)
                            else:
                                s.read(256 * 1024)
                        except ssl.SSLWantReadError:
                            break
                dec[mode] = (time.perf_counter() - t0) * 1000 / (TOTAL >> 20)
            enc_ms = min(enc)
            print(f"writes of {chunk >> 10:>5} KiB: encrypt {enc_ms:5.2f} ms/MB; decrypt "
                  + ", ".join(f"{m} {v:5.2f} ms/MB" for m, v in dec.items()))


if __name__ == "__main__":
    main()
