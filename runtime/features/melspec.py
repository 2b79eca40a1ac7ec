"""A power mel spectrogram as ``librosa.feature.melspectrogram`` computes it, without librosa.

Hann window (periodic), magnitude squared, librosa's Slaney mel filterbank, no log: the front
end of Resemblyzer's GE2E encoder. Framing is left to the caller (no centring here), so a batch
of equal-length spans, each carrying its own edge padding, runs as one STFT.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..specs import FeatureSpec
from .logmel import mel_filterbank


def power_mel_frames(audio: Tensor, spec: FeatureSpec) -> Tensor:
    """audio [..., S] fp32 -> [..., 1 + (S - n_fft) // hop, n_mels] fp32 mel power frames."""
    window = torch.hann_window(spec.n_fft, device=audio.device)
    stft = torch.stft(audio.float(), spec.n_fft, spec.hop_length, window=window, center=False, return_complex=True)
    power = stft.real.square() + stft.imag.square()  # [..., freqs, T]
    filters = mel_filterbank(spec.sample_rate, spec.n_fft, spec.n_mels).to(audio.device)
    return (filters @ power).transpose(-1, -2)
