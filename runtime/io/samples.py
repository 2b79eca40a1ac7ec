"""Decoded samples of a long recording, kept on disk and read a window at a time.

An hour at 16 kHz is 230 MB of float32. Pipelines read their input in windows (log-mel frames,
VAD chunks, pitch frames), so a long recording is decoded into an unnamed temporary file
(``SampleSink``, past ``SPOOL_SAMPLES``) and handed on as a ``SampleFile``: it has a length and
is sliced like a 1-D float32 array, each slice read from the file, so the process holds only the
windows in use. Short recordings stay plain numpy arrays. ``np.asarray(sample_file)`` still gives
the whole array, for the few callers that need it (at the memory cost it says).

Several channels (a song for separation) are kept as frames, the channels of a sample side by
side: such a SampleFile is sliced like a [channels, n] array (``x[:, a:b]``), one read a slice.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import torch

SPOOL_SAMPLES = 10 * 60 * 16000  # decoded samples kept in memory; past this they go to disk
_ITEM = 4  # bytes per float32 sample


class SampleFile:
    """Float32 samples in an unnamed temporary file; ``x[a:b]`` reads those samples (mono), or
    ``x[:, a:b]`` those frames as [channels, b - a] (``channels`` > 1). ``len`` counts samples
    per channel."""

    dtype = np.dtype(np.float32)

    def __init__(self, file, n: int, channels: int = 1):
        self._file = file
        self._fd = file.fileno()
        self.n = n
        self.channels = channels

    def __len__(self) -> int:
        return self.n

    @property
    def ndim(self) -> int:
        return 1 if self.channels == 1 else 2

    @property
    def size(self) -> int:
        return self.n * self.channels

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.n,) if self.channels == 1 else (self.channels, self.n)

    def read(self, start: int, stop: int) -> np.ndarray:
        """Samples [start, stop) clipped to the recording, as a new array ([channels, n] for several)."""
        start, stop = max(0, start), min(stop, self.n)
        c = self.channels
        out = np.empty(max(0, stop - start) * c, dtype=np.float32)
        view, offset = memoryview(out).cast("B"), start * c * _ITEM
        while view.nbytes:  # pread may return fewer bytes than asked
            got = os.preadv(self._fd, [view], offset)
            if got <= 0:
                raise OSError(f"the temporary samples file ended at byte {offset}")
            view, offset = view[got:], offset + got
        return out if c == 1 else np.ascontiguousarray(out.reshape(-1, c).T)

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, tuple) and len(key) == 2 and (key[0] is Ellipsis or (self.channels > 1 and isinstance(key[0], slice) and key[0] == slice(None))):
            key = key[1]  # x[..., a:b], as front ends slice batched tensors; x[:, a:b] of frames
        elif self.channels > 1:
            raise TypeError("a SampleFile of several channels is read as x[:, a:b]")
        if isinstance(key, slice):
            start, stop, step = key.indices(self.n)
            if step != 1:
                raise TypeError("a SampleFile is read in contiguous slices")
            return self.read(start, stop)
        if isinstance(key, (int, np.integer)):
            i = int(key) + (self.n if key < 0 else 0)
            if not 0 <= i < self.n:
                raise IndexError(f"sample {key} outside the {self.n} samples")
            return self.read(i, i + 1)[0]
        raise TypeError(f"a SampleFile takes slices, not {type(key).__name__}")

    def __array__(self, dtype=None, copy=None):
        whole = self.read(0, self.n)
        return whole if dtype is None else whole.astype(dtype, copy=False)

    def tensor(self, device: torch.device | str = "cpu") -> "SampleTensor":
        return SampleTensor(self, torch.device(device))

    def close(self) -> None:
        self._file.close()

    def __del__(self):  # the unnamed file's space is freed with its descriptor
        try:
            self._file.close()
        except Exception:
            pass


class SampleTensor:
    """A SampleFile as the 1-D float32 tensor a front end slices: ``x[..., a:b]`` is a tensor on
    ``device``; ``shape`` and ``device`` are what the front end reads."""

    dtype = torch.float32

    def __init__(self, samples: SampleFile, device: torch.device):
        self.samples, self.device = samples, device
        self.shape = torch.Size([len(samples)])

    def __getitem__(self, key) -> torch.Tensor:
        return torch.from_numpy(self.samples[key]).to(self.device)


class TooLong(Exception):
    """More samples were decoded than the sink's ``limit``; ``n``: how many it had then."""

    def __init__(self, n: int):
        super().__init__(n)
        self.n = n


class SampleSink:
    """Decoded pieces collected in order: in a growing array while short, moved to an unnamed
    temporary file once past ``SPOOL_SAMPLES`` values (or from the start when ``expected``, in
    samples per channel, says the recording is that long). Tracks the float64 sum, so finiteness
    needs no second pass. ``channels`` > 1: pieces are [channels, n], kept as frames. Past
    ``limit`` samples per channel it raises ``TooLong`` (a header can understate the length)."""

    def __init__(self, expected: int = 0, channels: int = 1, limit: int | None = None):
        self.n = 0
        self.channels = channels
        self.limit = limit
        expected = expected if limit is None else min(expected, limit)
        self.total = 0.0
        self._file = None
        values = expected * channels
        self._buffer = None if values > SPOOL_SAMPLES else np.empty(max(values + values // 50 + 4096, 16384), np.float32)
        if self._buffer is None:
            self._file = tempfile.TemporaryFile(prefix="oasr-samples-")

    def __len__(self) -> int:
        return self.n

    def extend(self, pieces) -> None:
        c = self.channels
        for piece in pieces:
            piece = np.asarray(piece, dtype=np.float32)
            if c > 1:
                if piece.ndim != 2 or piece.shape[0] != c:
                    raise ValueError(f"pieces of {c} channels are [{c}, n], not {piece.shape}")
                piece = piece.T  # frames: a sample of every channel side by side
            piece = np.ascontiguousarray(piece).reshape(-1)
            if self.limit is not None and self.n + len(piece) // c > self.limit:
                self.discard()
                raise TooLong(self.n + len(piece) // c)
            with np.errstate(invalid="ignore", over="ignore"):
                self.total += float(np.sum(piece, dtype=np.float64))
            end = self.n * c + len(piece)
            if self._file is None and end > SPOOL_SAMPLES:
                self._file = tempfile.TemporaryFile(prefix="oasr-samples-")
                self._file.write(memoryview(self._buffer[: self.n * c]).cast("B"))
                self._buffer = None
            if self._file is not None:
                self._file.write(memoryview(piece).cast("B"))
            else:
                self._grow(end)
                self._buffer[self.n * c : end] = piece
            self.n += len(piece) // c

    def _grow(self, end: int) -> None:
        if end > len(self._buffer):
            grown = np.empty(max(end, len(self._buffer) * 3 // 2), dtype=np.float32)
            grown[: self.n * self.channels] = self._buffer[: self.n * self.channels]
            self._buffer = grown

    @property
    def finite(self) -> bool:
        return bool(np.isfinite(self.total))

    def result(self) -> "np.ndarray | SampleFile":
        """The samples: [n] (mono) or [channels, n], an array while short, else a SampleFile."""
        c = self.channels
        if self._file is not None:
            self._file.flush()
            return SampleFile(self._file, self.n, c)
        if c > 1:
            return np.ascontiguousarray(self._buffer[: self.n * c].reshape(-1, c).T)
        if self.n < len(self._buffer) * 0.9:  # much shorter than expected: do not keep the slack
            return self._buffer[: self.n].copy()
        return self._buffer[: self.n]

    def discard(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._buffer = None


def as_samples(audio) -> "np.ndarray | SampleFile":
    """``audio`` as something sliced like a 1-D float32 array: a SampleFile as it is, anything
    else through ``np.asarray``."""
    return audio if isinstance(audio, SampleFile) else np.asarray(audio, dtype=np.float32)
