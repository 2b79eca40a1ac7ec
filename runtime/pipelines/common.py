"""What every pipeline takes in: audio in any accepted form, and the identity of a bundle's weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..errors import InputError

_BUNDLE_HASHES: dict[tuple[str, int, int], str] = {}


def read_audio(audio, sample_rate: int) -> tuple[np.ndarray, str]:
    """(mono float32 samples, source name) from a path or ``"-"`` (decoded at ``sample_rate``),
    encoded bytes, or samples (a 1-D array or tensor, taken as they are); the name is "" unless
    a path was given."""
    if isinstance(audio, (str, Path, bytes, bytearray, memoryview)):
        from ..io.audio import load_audio

        encoded = isinstance(audio, (bytes, bytearray, memoryview))
        return load_audio(bytes(audio) if encoded else audio, sample_rate), "" if encoded else str(audio)
    if isinstance(audio, torch.Tensor):
        audio = audio.detach().cpu().numpy()
    if not isinstance(audio, np.ndarray):
        raise InputError(f"audio must be a path, bytes or an array of samples, not {type(audio).__name__}")
    if audio.ndim != 1:
        raise InputError(f"audio samples must be mono (one channel, 1-D), got shape {tuple(audio.shape)}")
    samples = np.ascontiguousarray(audio, dtype=np.float32)
    return (samples if samples.flags.writeable else samples.copy()), ""


def bundle_sha256(path: str | Path) -> str:
    """sha256 of a native bundle's weights ("" for anything else), computed once per file version
    in this process."""
    from ..io.bundle import WEIGHTS_NAME, is_bundle
    from ..io.files import sha256_file

    path = Path(path)
    if not is_bundle(path):
        return ""
    weights = (path / WEIGHTS_NAME).resolve()
    stat = weights.stat()
    key = (str(weights), stat.st_size, stat.st_mtime_ns)
    if key not in _BUNDLE_HASHES:
        _BUNDLE_HASHES[key] = sha256_file(weights)
    return _BUNDLE_HASHES[key]
