"""Freed segment buffers go back to the system, so they do not pile up between forward passes.

glibc raises its mmap threshold to each large block freed, so HTDemucs' 10-70 MB buffers stay
in a fragmented heap (about 300 MB above what the process holds); fixing the threshold at 1 MB
returns them, for about 1.5x the time. It is process-wide, so the library never does it on its
own: ``oasr separate --low-memory`` (whose process it is) calls ``return_freed_buffers()``, and
so may a program that embeds ``oasr.separate``. The measurements: ``benchmarks/separate.py``.
"""

from __future__ import annotations

import ctypes
import logging
import platform

log = logging.getLogger("oasr")

THRESHOLD = 1 << 20  # blocks from 1 MB up are mmapped and given back when freed
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def return_freed_buffers(threshold: int = THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes (and trim the heap above twice that);
    False, doing nothing, where the C library is not glibc."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # pragma: no cover - glibc always has it
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = bool(mallopt(_M_MMAP_THRESHOLD, threshold)) and bool(mallopt(_M_TRIM_THRESHOLD, 2 * threshold))
    log.debug("glibc mmap threshold fixed at %d bytes: %s", threshold, done)
    return done
