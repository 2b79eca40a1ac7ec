"""What every pipeline takes in: audio in any accepted form."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..errors import InputError
from ..io.samples import SampleFile

def read_audio(audio, sample_rate: int) -> tuple["np.ndarray | SampleFile", str]:
    """(mono float32 samples, source name) from a path or ``"-"`` (decoded at ``sample_rate``),
    encoded bytes, or samples (a 1-D array or tensor, or a ``SampleFile``, taken as they are); the
    name is "" unless a path was given. A long recording decoded here is a ``SampleFile`` (kept on
    disk, read a window at a time: ``io/samples.py``)."""
    if isinstance(audio, SampleFile):
        return audio, ""
    if isinstance(audio, (str, Path, bytes, bytearray, memoryview)):
        from ..io.audio import open_audio

        encoded = isinstance(audio, (bytes, bytearray, memoryview))
        return open_audio(bytes(audio) if encoded else audio, sample_rate), "" if encoded else str(audio)
    if isinstance(audio, torch.Tensor):
        audio = audio.detach().cpu().numpy()
    if not isinstance(audio, np.ndarray):
        raise InputError(f"audio must be a path, bytes or an array of samples, not {type(audio).__name__}")
    if audio.ndim != 1:
        raise InputError(f"audio samples must be mono (one channel, 1-D), got shape {tuple(audio.shape)}")
    samples = np.ascontiguousarray(audio, dtype=np.float32)
    return (samples if samples.flags.writeable else samples.copy()), ""
