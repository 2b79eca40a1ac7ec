"""The log-mel of Whisper's windows: read from the whole file (sequential) or from a window's own samples (batched)."""

from __future__ import annotations

from typing import Callable

import torch

from ....io.samples import SampleTensor
from .window import Geometry


def whole_file_mel(audio, spec, geometry: Geometry) -> Callable[[int, int], torch.Tensor]:
    """``mel(seek, size)``: log-mel frames ``seek .. seek + size - 1`` of ``audio`` followed by
    30 s of zeros, as openai frames and clamps the whole padded file (``log_mel_spectrogram``
    of the whole file, then sliced). The built-in front end computes only the window asked
    for, with the file's largest value (found in blocks when the first window is decoded) as
    the clamp's reference, so memory does not grow with the file; another front end (an
    ``oasr.features`` plugin) is run over the whole file once."""
    from ....features import feature_extractor
    from ....features.logmel import log_mel_reference, log_mel_spectrogram

    extract = feature_extractor(spec)
    padding = geometry.n_frames * geometry.hop  # + 30 s of zeros, as openai
    if extract is not log_mel_spectrogram:
        if isinstance(audio, SampleTensor):  # a plugin front end takes the whole signal
            audio = audio[..., :]
        whole = extract(audio, spec, padding=padding)
        return lambda seek, size: whole[:, seek : seek + size]
    reference: list[torch.Tensor] = []

    def mel(seek: int, size: int) -> torch.Tensor:
        if not reference:
            reference.append(log_mel_reference(audio, spec, padding))
        return log_mel_spectrogram(audio, spec, padding, frames=(seek, size), reference=reference[0])

    return mel


def window_mel(audio: torch.Tensor, spec, geometry: Geometry) -> torch.Tensor:
    """One window's log-mel [n_mels, 3000]: its samples then zeros to 30 s (its own clamp
    reference, as a clip decoded alone)."""
    from ....features import feature_extractor

    mel = feature_extractor(spec)(audio, spec, padding=geometry.n_frames * geometry.hop)
    return mel[:, : geometry.n_frames]
