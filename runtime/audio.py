"""Audio in: any file soundfile reads, downmixed to mono and resampled (band-limited, soxr)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import InputError


def load_audio(path: str | Path, sample_rate: int = 16000) -> np.ndarray:
    """Mono float32 samples in [-1, 1] at ``sample_rate``."""
    import soundfile as sf
    import soxr

    path = Path(path)
    if not path.exists():
        raise InputError(f"no such file: {path}")
    if path.is_dir():
        raise InputError(f"{path} is a directory, not an audio file")
    if path.stat().st_size == 0:
        raise InputError(f"{path} is empty")
    try:
        data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, TypeError) as e:
        raise InputError(f"cannot decode {path}: not an audio format soundfile reads ({e})") from e
    mono = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
    if rate != sample_rate:
        mono = soxr.resample(mono, rate, sample_rate, quality="HQ")
    return np.ascontiguousarray(mono, dtype=np.float32)
