"""How many compiled kernels oneDNN keeps, for the command's process.

oneDNN compiles a kernel for each input shape and keeps up to 1024 of them, each with buffers
sized to its shapes, in two caches: its own and ideep's (PyTorch's wrapper around it). Work whose
shapes change with every input (a sentence for tts, a local speaker's speech for diarization,
a file's length for an encoder-only model) filled them for nothing used again: 60 sentences of a
Piper voice grew ``oasr tts`` to 935 MB, three minutes of diarization to 790 MB. Kept to 64, the
same runs held 570 and 630 MB at the same speed, and Whisper (a fixed set of shapes) is not
affected in time or memory. Both sizes are read at oneDNN's first use; a size the user set in the
environment is kept.
"""

from __future__ import annotations

import os

VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")  # oneDNN's, ideep's
DEFAULT = 64
USER_SET = frozenset(name for name in VARIABLES if name in os.environ)  # before any command set one


def cap(capacity: int = DEFAULT) -> None:
    """Both caches at ``capacity`` kernels, except a size the user set; call it before the
    command's first tensor work."""
    for name in VARIABLES:
        if name not in USER_SET:
            os.environ[name] = str(capacity)
