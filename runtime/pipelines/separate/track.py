"""A track as the model hears it: its channels kept, resampled with soxr, laid out as the model's.

WAV, FLAC, Ogg, AIFF and the other formats libsndfile reads keep their channels; anything else
goes through ``oasr.io.audio.load_audio`` (PyAV, every container), which gives one channel: such
a track is separated as mono (logged). Channels become the model's as demucs converts them
(``convert_audio_channels``): mono is repeated, a model of one channel takes the mean, more
channels than the model's are cut to its first ones.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ...errors import InputError
from ...io import audio as _audio

log = logging.getLogger("oasr")

MIN_SECONDS = 0.01  # shorter input holds no music to separate (and no std to normalise by)


def read_track(audio, sample_rate: int, channels: int, *, input_rate: int | None = None) -> tuple[np.ndarray, str]:
    """(float32 [channels, n] at ``sample_rate``, source name) from a path, "-", encoded bytes or
    samples ([n] or [c, n] at ``input_rate``, default ``sample_rate``)."""
    if isinstance(audio, (str, Path)):
        if str(audio) == _audio.STDIN:
            with _audio.spool_stdin() as file:
                data = _decode(file, _audio.STDIN_NAME, sample_rate, None)
            name = _audio.STDIN
        else:
            path = _audio.check_audio_path(audio)
            try:
                file = open(path, "rb")
            except OSError as e:
                raise InputError(f"cannot read {path}: {e.strerror or e}") from e
            with file:
                data = _decode(file, str(path), sample_rate, path)
            name = str(audio)
    elif isinstance(audio, (bytes, bytearray, memoryview)):
        import io

        if not audio:
            raise InputError("<bytes> is empty (no audio bytes)")
        data, name = _decode(io.BytesIO(bytes(audio)), "<bytes>", sample_rate, None), ""
    else:
        data, name = _samples(audio, sample_rate, input_rate), ""
    data = convert_channels(data, channels, name or "the audio")
    seconds = data.shape[-1] / sample_rate
    if seconds < MIN_SECONDS:
        raise InputError(
            f"{name or 'the audio'} holds {data.shape[-1]} sample(s) at {sample_rate} Hz; "
            f"separation needs at least {MIN_SECONDS * 1000:g} ms"
        )
    if not _audio.all_finite(data):
        raise InputError(f"{name or 'the audio'} holds non-finite samples (NaN or infinity)")
    return data, name


def _decode(file: BinaryIO, name: str, sample_rate: int, path: Path | None) -> np.ndarray:
    head = file.read(64)
    file.seek(0)
    if not head:
        raise InputError(f"{name} is empty (no audio bytes)")
    if head.startswith(_audio.SOUNDFILE_MAGIC):
        import soundfile as sf

        try:
            data, rate = sf.read(file, dtype="float32", always_2d=True)
        except (sf.LibsndfileError, RuntimeError, TypeError, ValueError, EOFError) as e:
            reason = getattr(e, "error_string", "") or str(e) or type(e).__name__
            raise InputError(f"cannot decode {name}: {reason.splitlines()[0]}") from e
        return _resample(data.T, rate, sample_rate)
    file.seek(0)
    log.info("%s: decoded by PyAV as one channel (its channels are kept for libsndfile formats only)", name)
    mono = _audio.load_audio(path if path is not None else file.read(), sample_rate)
    return mono[None]


def _samples(audio, sample_rate: int, input_rate: int | None) -> np.ndarray:
    try:
        import torch

        if isinstance(audio, torch.Tensor):
            audio = audio.detach().cpu().numpy()
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    if not isinstance(audio, np.ndarray):
        raise InputError(f"audio must be a path, bytes or an array of samples, not {type(audio).__name__}")
    if audio.ndim not in (1, 2):
        raise InputError(f"audio samples must be [n] or [channels, n], got shape {tuple(audio.shape)}")
    data = np.asarray(audio, dtype=np.float32).reshape(-1 if audio.ndim == 1 else audio.shape[0], audio.shape[-1])
    if audio.ndim == 1:
        data = data.reshape(1, -1)
    return _resample(data, input_rate or sample_rate, sample_rate)


def _resample(data: np.ndarray, rate: int, sample_rate: int) -> np.ndarray:
    """[c, n] at ``rate`` -> [c, m] at ``sample_rate`` (soxr HQ, every channel at once)."""
    if rate != sample_rate and data.shape[-1]:
        import soxr

        log.info("resampling %d Hz to the model's %d Hz", rate, sample_rate)
        data = soxr.resample(np.ascontiguousarray(data.T), rate, sample_rate, quality="HQ").T
    return np.ascontiguousarray(data, dtype=np.float32)


def convert_channels(data: np.ndarray, channels: int, name: str) -> np.ndarray:
    """[c, n] -> [channels, n] as demucs' convert_audio_channels."""
    have = data.shape[0]
    if have == channels:
        return data
    if channels == 1:
        return data.mean(axis=0, keepdims=True, dtype=np.float32)
    if have == 1:
        return np.ascontiguousarray(np.repeat(data, channels, axis=0))
    if have > channels:
        return np.ascontiguousarray(data[:channels])
    raise InputError(f"{name} has {have} channels; the model wants {channels} and cannot make them from {have}")
