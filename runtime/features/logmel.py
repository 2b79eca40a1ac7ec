"""Whisper's log-mel spectrogram in torch (80 or 128 bins), on whatever device the audio is on.

The filterbank is librosa's ``filters.mel(sr, n_fft, n_mels)`` (Slaney mel scale and area
normalisation), rebuilt here so no audio library is needed at run time.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ..specs import FeatureSpec

_F_SP = 200.0 / 3  # Slaney: linear below 1 kHz, 3 mels per 200 Hz
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP
_LOGSTEP = math.log(6.4) / 27.0


def _hz_to_mel(hz: Tensor) -> Tensor:
    linear = hz / _F_SP
    log = _MIN_LOG_MEL + torch.log(torch.clamp(hz, min=_MIN_LOG_HZ) / _MIN_LOG_HZ) / _LOGSTEP
    return torch.where(hz >= _MIN_LOG_HZ, log, linear)


def _mel_to_hz(mel: Tensor) -> Tensor:
    linear = mel * _F_SP
    log = _MIN_LOG_HZ * torch.exp(_LOGSTEP * (mel - _MIN_LOG_MEL))
    return torch.where(mel >= _MIN_LOG_MEL, log, linear)


@functools.lru_cache(maxsize=8)
def mel_filterbank(sample_rate: int, n_fft: int, n_mels: int) -> Tensor:
    """[n_mels, n_fft // 2 + 1] fp32 triangular filters, computed in fp64."""
    fft_freqs = torch.linspace(0, sample_rate / 2, n_fft // 2 + 1, dtype=torch.float64)
    mel_edges = torch.linspace(
        float(_hz_to_mel(torch.tensor(0.0, dtype=torch.float64))),
        float(_hz_to_mel(torch.tensor(sample_rate / 2, dtype=torch.float64))),
        n_mels + 2,
        dtype=torch.float64,
    )
    hz_edges = _mel_to_hz(mel_edges)
    widths = torch.diff(hz_edges)
    ramps = hz_edges[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = torch.clamp(torch.minimum(lower, upper), min=0)
    weights *= (2.0 / (hz_edges[2:] - hz_edges[:-2]))[:, None]
    return weights.float()


def log_mel_spectrogram(audio: Tensor, spec: FeatureSpec, padding: int = 0) -> Tensor:
    """audio [..., samples] fp32 at ``spec.sample_rate`` -> [..., n_mels, samples // hop] fp32.

    ``padding`` zero samples are appended first (Whisper pads 30 s so every window is full).
    """
    audio = audio.float() * spec.audio_scale
    if padding:
        audio = F.pad(audio, (0, padding))
    window = torch.hann_window(spec.n_fft, device=audio.device)
    stft = torch.stft(audio, spec.n_fft, spec.hop_length, window=window, return_complex=True)
    power = stft[..., :-1].abs() ** 2
    filters = mel_filterbank(spec.sample_rate, spec.n_fft, spec.n_mels).to(audio.device)
    mel = filters @ power
    log_spec = torch.clamp(mel, min=1e-10).log10()
    log_spec = torch.maximum(log_spec, log_spec.amax(dim=(-2, -1), keepdim=True) - 8.0)
    return (log_spec + 4.0) / 4.0
