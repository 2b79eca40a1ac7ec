"""Freed segment buffers go back to the system, so they do not pile up between forward passes.

An HTDemucs forward pass on a 7.8 s segment allocates tens of tensors of 10 to 70 MB and frees
them again. glibc serves blocks above its mmap threshold with mmap and returns them when freed,
but it raises that threshold to the size of each such block freed (up to 32 MB), so after the
first pass most of them come from the heap, stay there when freed, and fragment it: the
process then peaks about 300 MB above what it holds at any moment (measured at the released
htdemucs shape, 960 MB against 670 MB with the threshold fixed at 1 MB). Fixing the threshold
is process-wide, so the library does not do it on its own: ``oasr separate --low-memory`` (whose
process it is) calls ``return_freed_buffers()``, and so may a program that embeds ``oasr.separate``.

It is not the default because every such block is then a fresh mmap whose pages are faulted in
and zeroed. 3 minutes of a 44.1 kHz stereo track at the released htdemucs shape, 2 threads
(``benchmarks/separate.py``, against demucs on the same weights): 1.21x demucs' time and 0.38x its
peak memory with the threshold at 1 MB, 0.76x and 0.51x with glibc's own behaviour. (Before the
forward pass ran its widest layers a few rows at a time, 30 s took 26.7 s and 731 MB at 1 MB,
16.3 s and 979 MB with glibc's own behaviour; a threshold of 4 or 16 MB, or ``malloc_trim`` after
each segment, fell between the two.)
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
