"""One batch run per OUTDIR at a time: two runs that write one ``batch.jsonl`` would each rewrite
it from what they saw, and the run that ended first would vanish from the record.

The lock is ``flock`` on the folder itself (no lock file left behind); the system drops it when
the process ends, however it ends. Where there is no ``fcntl`` (Windows) runs are not locked.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

from ..errors import InputError


@contextlib.contextmanager
def outdir_lock(outdir: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:
        yield
        return
    outdir.mkdir(parents=True, exist_ok=True)
    fd = os.open(outdir, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(f"another oasr batch run is writing to {outdir}; wait for it to end, or give another -o OUTDIR") from None
        yield
    finally:
        os.close(fd)  # the lock goes with the descriptor
