"""Streamed 16-bit PCM WAV with a RIFF INFO chunk (what made the file), and raw s16le.

The header goes out first, with the sizes still unknown (0xFFFFFFFF, as streaming writers do);
a seekable file gets its true sizes written back when it is finished, a pipe keeps the
placeholder, which readers take as "until the end". The INFO chunk sits before the data:
ISFT names oasr and its version, ICMT what synthesized the speech and from which model.
"""

from __future__ import annotations

import contextlib
import io
import os
import struct
from pathlib import Path
from typing import BinaryIO, Iterator, Mapping

import numpy as np

from ..io.files import sweep_stale, temp_sibling

UNKNOWN = 0xFFFFFFFF
PCM_SCALE = 32767.0  # Piper's: a float sample of 1.0 is 32767


def pcm16(samples: np.ndarray) -> bytes:
    """float samples in [-1, 1] -> little-endian int16 bytes (clipped, as Piper does)."""
    return np.clip(np.asarray(samples, dtype=np.float32) * PCM_SCALE, -PCM_SCALE, PCM_SCALE).astype("<i2").tobytes()


def info_chunk(tags: Mapping[str, str]) -> bytes:
    """``LIST``/``INFO`` with each tag's text NUL-terminated and padded to an even length."""
    body = b"INFO"
    for key, text in tags.items():
        data = text.encode("utf-8") + b"\0"
        if len(data) % 2:
            data += b"\0"
        body += key.encode("ascii") + struct.pack("<I", len(data)) + data
    return b"LIST" + struct.pack("<I", len(body)) + body


def wav_header(sample_rate: int, tags: Mapping[str, str], data_bytes: int | None = None) -> bytes:
    """RIFF, ``fmt `` (mono 16-bit PCM), INFO, and the ``data`` chunk's head."""
    fmt = struct.pack("<4sIHHIIHH", b"fmt ", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16)
    info = info_chunk(tags)
    size = UNKNOWN if data_bytes is None else 4 + len(fmt) + len(info) + 8 + data_bytes
    data = UNKNOWN if data_bytes is None else data_bytes
    return b"RIFF" + struct.pack("<I", size) + b"WAVE" + fmt + info + b"data" + struct.pack("<I", data)


class PcmWriter:
    """Writes float chunks as s16le, behind a WAV header unless ``raw``; ``finish`` fixes the sizes."""

    def __init__(self, out: BinaryIO, sample_rate: int, tags: Mapping[str, str], *, raw: bool = False):
        self.out, self.sample_rate, self.tags, self.raw = out, sample_rate, dict(tags), raw
        self.data_bytes = 0
        if not raw:
            out.write(wav_header(sample_rate, self.tags))

    def write(self, samples: np.ndarray) -> None:
        data = pcm16(samples)
        self.out.write(data)
        self.data_bytes += len(data)
        self.out.flush()

    def finish(self) -> None:
        if self.raw:
            return
        try:
            seekable = self.out.seekable()
        except (AttributeError, ValueError, OSError):
            seekable = False
        if seekable and self.data_bytes < UNKNOWN - 64:
            self.out.seek(0)
            self.out.write(wav_header(self.sample_rate, self.tags, self.data_bytes))
            self.out.seek(0, io.SEEK_END)
        self.out.flush()


@contextlib.contextmanager
def atomic_stream(path: Path) -> Iterator[BinaryIO]:
    """A file to write in pieces that appears at ``path`` only once complete (a temporary beside
    it, renamed over it); a device or FIFO is written directly. On failure nothing is left."""
    path = Path(path)
    try:
        special = path.exists() and not path.is_file() and not path.is_dir()
    except OSError:
        special = False
    if special:
        with open(path, "wb") as f:
            yield f
        return
    target = path.resolve() if path.is_symlink() else path
    sweep_stale(target)
    tmp = temp_sibling(target, "tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with os.fdopen(fd, "w+b") as f:
            yield f
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
