"""glibc allocator settings for the broker process.

Theory of operation: the broker's hot paths allocate and free buffers of 16 KiB to a few MB
many times a second (a Produce frame's buffer, the bytes a follower or consumer fetch reads
from a segment, OpenSSL's decrypted records). glibc serves anything above its mmap threshold
(128 KiB at first) with a fresh ``mmap`` and hands the heap's free top back to the kernel
once it passes the trim threshold, so every such buffer was faulted in page by page and
zeroed by the kernel again: ``perf`` put the page faults at a large share of the broker's
kernel time over TLS, and on a VM whose host backs guest memory on first touch they cost
more still. Raising the mmap threshold to 8 MiB and the trim threshold to 32 MiB (with 4 MiB
of top padding) lets freed buffers be reused from the heap instead; the price is up to
~36 MiB more resident memory after a burst, which glibc still returns beyond that.

Measured (bench/security.py, 300,000 x 1 KiB, one broker): broker CPU per MB produced over
TLS 2.9 -> 2.4 ms, PLAINTEXT 1.3 -> 1.1 ms. Any ``MALLOC_*_`` tunable set in the environment
is the operator's choice and is left alone, as is a libc without ``mallopt``; the broker property
``malloc.tuning.enable=false`` keeps glibc's defaults.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys

log = logging.getLogger("samsa.server")

M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

SETTINGS = ((M_MMAP_THRESHOLD, 8 << 20, "MALLOC_MMAP_THRESHOLD_"),
            (M_TRIM_THRESHOLD, 32 << 20, "MALLOC_TRIM_THRESHOLD_"),
            (M_TOP_PAD, 4 << 20, "MALLOC_TOP_PAD_"))


def tune(enabled: bool = True) -> bool:
    """Apply SETTINGS with glibc's mallopt(3) (``malloc.tuning.enable``). Returns True if anything was set."""
    if not enabled or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # not glibc (musl has no mallopt): nothing to tune
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    done = False
    for param, value, env in SETTINGS:
        if env in os.environ:
            continue
        if mallopt(param, value) == 1:
            done = True
        else:
            log.debug("mallopt(%d, %d) refused", param, value)
    return done
