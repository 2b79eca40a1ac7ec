"""A track as the model hears it: its channels made the model's, resampled with soxr, read in windows.

Files, stdin and encoded bytes go through ``oasr.io.audio.open_audio`` with the model's rate and
channel count, whatever the container (libsndfile's formats and PyAV's alike keep their
channels). Channels become the model's as demucs converts them (``fit_channels``: mono is
repeated, a model of one channel takes the mean, more channels than the model's are cut to its
first ones). A long track is decoded into an unnamed temporary file (a ``SampleFile`` of frames),
so the process holds only the windows the networks read; arrays given by the caller stay as they
are.

``Track`` is what the lanes of ``overlap.stream`` read: windows normalised as demucs.separate
normalises the whole track, by the mean and std of its mono mix. Those two numbers come from a
first pass over the samples, a block at a time.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from ...errors import InputError
from ...io import audio as _audio
from ...io.samples import SampleFile

log = logging.getLogger("oasr")

MIN_SECONDS = 0.01  # shorter input holds no music to separate (and no std to normalise by)
STATS_BLOCK = 1 << 18  # frames summed at a time for the mean and std


def read_track(audio, sample_rate: int, channels: int, *, input_rate: int | None = None) -> tuple[np.ndarray | SampleFile, str]:
    """(float32 [channels, n] at ``sample_rate`` — an array, or a SampleFile for a long decoded
    track — , source name) from a path, "-", encoded bytes or samples ([n] or [c, n] at
    ``input_rate``, default ``sample_rate``)."""
    if isinstance(audio, (str, Path)):
        data, name = _audio.open_audio(audio, sample_rate, channels), str(audio)
    elif isinstance(audio, (bytes, bytearray, memoryview)):
        data, name = _audio.open_audio(bytes(audio), sample_rate, channels), ""
    else:
        data, name = _audio.fit_channels(_samples(audio, sample_rate, input_rate), channels), ""
        if not _audio.all_finite(data):
            raise InputError("the audio holds non-finite samples (NaN or infinity)")
    if isinstance(data, np.ndarray) and data.ndim == 1:
        data = data[None]  # a model of one channel: open_audio's mono
    n = data.shape[-1]
    if n / sample_rate < MIN_SECONDS:
        raise InputError(
            f"{name or 'the audio'} holds {n} sample(s) at {sample_rate} Hz; separation needs at least {MIN_SECONDS * 1000:g} ms"
        )
    return data, name


def frames(samples: np.ndarray | SampleFile, a: int, b: int) -> np.ndarray:
    """Samples [a, b) of every channel, [channels, b - a]."""
    if isinstance(samples, SampleFile):
        return samples.read(a, b).reshape(samples.channels, -1)
    return samples[:, a:b]


def mix_stats(samples: np.ndarray | SampleFile) -> tuple[float, float]:
    """Mean and (unbiased) std of the mono mix (the channels' float32 mean), as demucs.separate
    takes them, in one pass of float64 sums shifted by the first block's mean (no cancellation)."""
    n = samples.shape[-1]
    shift = total = squares = 0.0
    for a in range(0, n, STATS_BLOCK):
        mono = frames(samples, a, min(a + STATS_BLOCK, n)).mean(axis=0, dtype=np.float32).astype(np.float64)
        if a == 0:
            shift = float(mono.mean())
        mono -= shift
        total += float(mono.sum())
        squares += float(np.dot(mono, mono))
    mean = total / n
    var = (squares - n * mean * mean) / (n - 1) if n > 1 else 0.0
    return shift + mean, float(np.sqrt(max(var, 0.0)))


class Track:
    """Windows of ``samples`` [channels, n] as the networks take them: ``(x - mean) / std`` in
    float32 (demucs' order), then the model's dtype, on its device."""

    def __init__(self, samples: np.ndarray | SampleFile, mean: float, std: float, device: torch.device, dtype: torch.dtype):
        self.samples, self.device, self.dtype = samples, device, dtype
        self.channels, self.length = samples.shape[0], samples.shape[-1]
        self.mean = torch.tensor(mean, dtype=torch.float32, device=device)
        self.std = torch.tensor(std, dtype=torch.float32, device=device)

    def read(self, a: int, b: int) -> torch.Tensor:
        x = torch.from_numpy(np.ascontiguousarray(frames(self.samples, a, b), dtype=np.float32)).to(self.device)
        return ((x - self.mean) / self.std).to(self.dtype)


def _samples(audio, sample_rate: int, input_rate: int | None) -> np.ndarray:
    if isinstance(audio, torch.Tensor):
        audio = audio.detach().cpu().numpy()
    if not isinstance(audio, np.ndarray):
        raise InputError(f"audio must be a path, bytes or an array of samples, not {type(audio).__name__}")
    if audio.ndim not in (1, 2):
        raise InputError(f"audio samples must be [n] or [channels, n], got shape {tuple(audio.shape)}")
    data = np.asarray(audio, dtype=np.float32).reshape(1 if audio.ndim == 1 else audio.shape[0], audio.shape[-1])
    return _resample(data, input_rate or sample_rate, sample_rate)


def _resample(data: np.ndarray, rate: int, sample_rate: int) -> np.ndarray:
    """[c, n] at ``rate`` -> [c, m] at ``sample_rate`` (soxr HQ, every channel at once)."""
    if rate != sample_rate and data.shape[-1]:
        import soxr

        log.info("resampling %d Hz to the model's %d Hz", rate, sample_rate)
        data = soxr.resample(np.ascontiguousarray(data.T), rate, sample_rate, quality="HQ").T
    return np.ascontiguousarray(data, dtype=np.float32)
