"""glibc's heap: what the process gives back to the system, and when.

glibc keeps freed blocks in its heap for reuse and raises its mmap threshold to each large block
freed, so large tensors freed by one layer stay resident for the next. Two remedies, with
different costs:

* ``release_free_pages()`` (``malloc_trim``) hands the pages of the heap's free blocks back once.
  Whisper's encoder calls it between the blocks of the first window a process encodes: the
  3-12 MB activations land a little elsewhere in each block, so the pages the heap has touched
  grew about 10 MB a block (72 MB over base's 6 blocks; with the release, none). The next block
  faults its pages in again, about 5 ms a block; once the heap has grown to its working size
  (later windows, a batch's decoding) each release gives back and faults in far more: 0.9 s over
  11 windows of a batched run, whose peak it did not lower.
* ``return_freed_buffers()`` fixes the mmap threshold, so every block from 1 MB up is returned
  when freed: process-wide and about 1.5x slower for HTDemucs, so only ``oasr separate
  --low-memory`` (whose process it is) sets it, as may a program embedding ``oasr.separate``
  (``benchmarks/separate.py``).

Both do nothing where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import platform

log = logging.getLogger("oasr")

THRESHOLD = 1 << 20  # return_freed_buffers: blocks from 1 MB up are mmapped and given back when freed
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    libc = ctypes.CDLL(None)
    libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return libc


def release_free_pages() -> bool:
    """Give the pages of glibc's free heap blocks back to the system (all arenas); False where
    there is nothing to call."""
    libc = _glibc()
    return libc is not None and libc.malloc_trim(0) >= 0


def return_freed_buffers(threshold: int = THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes (and trim the heap above twice that);
    False, doing nothing, where the C library is not glibc."""
    libc = _glibc()
    if libc is None:
        return False
    done = bool(libc.mallopt(_M_MMAP_THRESHOLD, threshold)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, 2 * threshold))
    log.debug("glibc mmap threshold fixed at %d bytes: %s", threshold, done)
    return done
