"""glibc's heap: what the process gives back to the system, and when.

glibc keeps freed blocks in its heap for reuse and raises its mmap threshold to each large block
freed, so large tensors freed by one layer stay resident for the next. Two remedies, with
different costs:

* ``release_free_pages()`` (``malloc_trim``) hands the pages of the heap's free blocks back once.
  Inside ``releasing_between_layers()``, a model calling ``between_layers()`` (Whisper's encoder,
  after each block) does so: the 3-12 MB activations of a window land a little elsewhere in each
  block, so the pages the heap has touched grew about 10 MB a block (72 MB over base's 6
  blocks; with the releases, none). The next block faults its pages in again, about 5 ms a
  block, and a later window grows the heap anyway (releasing in the first of the 330 s file's
  windows, batched: 0.1-0.17 s slower), so the transcription pipelines ask for it only when a
  recording is a single window.
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
from contextlib import contextmanager
from typing import Iterator

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


_releasing = False  # see releasing_between_layers


@contextmanager
def releasing_between_layers() -> Iterator[None]:
    """While inside, ``between_layers()`` gives the heap's free pages back: for work that grows
    the heap layer by layer once and does not run again (a recording of one window)."""
    global _releasing
    previous, _releasing = _releasing, True
    try:
        yield
    finally:
        _releasing = previous


def between_layers() -> None:
    """A model's hook between its layers: the free pages go back inside ``releasing_between_layers()``."""
    if _releasing:
        release_free_pages()


def return_freed_buffers(threshold: int = THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes (and trim the heap above twice that);
    False, doing nothing, where the C library is not glibc."""
    libc = _glibc()
    if libc is None:
        return False
    done = bool(libc.mallopt(_M_MMAP_THRESHOLD, threshold)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, 2 * threshold))
    log.debug("glibc mmap threshold fixed at %d bytes: %s", threshold, done)
    return done
