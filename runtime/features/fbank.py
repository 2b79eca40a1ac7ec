"""Kaldi's log mel filterbank (``compute-fbank-feats``), as ``torchaudio.compliance.kaldi.fbank``
computes it, in plain torch and batched: the front end of WeSpeaker's speaker encoders.

Per frame (``snip_edges``: only frames that fit whole; without it, one frame per shift over
audio mirrored at both ends, as lhotse and icefall frame it): the frame's mean removed, pre-emphasis
(the first sample against itself), a symmetric window, zero padding to a power of two, the power
spectrum, Kaldi's triangular mel bands (``1127 ln(1 + f / 700)``, from ``low_freq`` to
``high_freq``, zero weight on the Nyquist bin), then ``log(max(energy, float32 eps))``. No energy
column, no dither (inference), no VTLN. ``centered_fbank`` adds WeSpeaker's per-utterance
normalisation: the mean over the utterance's frames subtracted from every frame.

Shapes: B waveforms, S samples, T frames, M mel bands.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..errors import InputError

EPSILON = torch.finfo(torch.float32).eps  # Kaldi's floor before the log
WINDOWS = ("hamming", "hanning", "povey", "rectangular")


@dataclass(frozen=True)
class FbankOptions:
    sample_rate: int = 16000
    num_mel_bins: int = 80
    frame_length_ms: float = 25.0
    frame_shift_ms: float = 10.0
    window: str = "hamming"
    preemphasis: float = 0.97
    remove_dc_offset: bool = True
    low_freq: float = 20.0
    high_freq: float = 0.0  # <= 0: that far below the Nyquist frequency
    round_to_power_of_two: bool = True
    snip_edges: bool = True  # False: a frame every shift centred on it, the audio mirrored past both ends (lhotse, icefall)

    @property
    def window_size(self) -> int:
        return int(self.sample_rate * self.frame_length_ms * 0.001)

    @property
    def window_shift(self) -> int:
        return int(self.sample_rate * self.frame_shift_ms * 0.001)

    @property
    def padded_size(self) -> int:
        size = self.window_size
        return 1 << (size - 1).bit_length() if self.round_to_power_of_two else size

    def num_frames(self, samples: int) -> int:
        if not self.snip_edges:
            return (samples + self.window_shift // 2) // self.window_shift
        return 0 if samples < self.window_size else 1 + (samples - self.window_size) // self.window_shift

    def check(self) -> "FbankOptions":
        if self.window not in WINDOWS:
            raise InputError(f"fbank window {self.window!r} is not one of {', '.join(WINDOWS)}")
        if not 2 <= self.window_size or self.window_shift < 1 or self.padded_size % 2:
            raise InputError(
                f"fbank frames of {self.window_size} samples every {self.window_shift} (padded to "
                f"{self.padded_size}): need at least 2 samples, a shift of 1 or more, an even padded size"
            )
        nyquist = self.sample_rate / 2
        high = self.high_freq if self.high_freq > 0 else self.high_freq + nyquist
        if not (0 <= self.low_freq < nyquist and 0 < high <= nyquist and self.low_freq < high):
            raise InputError(f"fbank band {self.low_freq}-{high} Hz does not fit under {nyquist} Hz")
        return self


def _mel(freq):
    return 1127.0 * torch.log(1.0 + freq / 700.0) if isinstance(freq, Tensor) else 1127.0 * math.log(1.0 + freq / 700.0)


@functools.lru_cache(maxsize=8)
def kaldi_mel_banks(options: FbankOptions) -> Tensor:
    """[M, padded_size // 2 + 1] triangular mel weights over the power spectrum's bins."""
    bins, n_fft = options.num_mel_bins, options.padded_size
    nyquist = options.sample_rate / 2
    high = options.high_freq if options.high_freq > 0 else options.high_freq + nyquist
    mel_low, mel_high = _mel(options.low_freq), _mel(high)
    delta = (mel_high - mel_low) / (bins + 1)
    band = torch.arange(bins).unsqueeze(1)  # [M, 1]; each edge computed alone, as Kaldi rounds them
    left, centre, right = (mel_low + (band + j) * delta for j in (0.0, 1.0, 2.0))
    mel = _mel(options.sample_rate / n_fft * torch.arange(n_fft // 2)).unsqueeze(0)  # [1, bins below Nyquist]
    up, down = (mel - left) / (centre - left), (right - mel) / (right - centre)
    weights = torch.clamp(torch.minimum(up, down), min=0.0)
    return torch.nn.functional.pad(weights, (0, 1))  # the Nyquist bin carries no weight


def _window(options: FbankOptions, device, dtype) -> Tensor:
    size = options.window_size
    if options.window == "hamming":
        return torch.hamming_window(size, periodic=False, alpha=0.54, beta=0.46, device=device, dtype=dtype)
    if options.window == "hanning":
        return torch.hann_window(size, periodic=False, device=device, dtype=dtype)
    if options.window == "povey":
        return torch.hann_window(size, periodic=False, device=device, dtype=dtype).pow(0.85)
    return torch.ones(size, device=device, dtype=dtype)


def _mirrored(x: Tensor, options: FbankOptions, frames: int) -> Tensor:
    """Kaldi's ``snip_edges=false`` framing: frame f starts at f * shift + shift // 2 - window // 2,
    and a sample before the start or past the end is read mirrored (index -1 is sample 0)."""
    n = x.shape[-1]
    left = options.window_size // 2 - options.window_shift // 2
    right = max(0, (frames - 1) * options.window_shift - left + options.window_size - n)
    index = torch.arange(-left, n + right, device=x.device)
    index = torch.where(index < 0, -index - 1, index)
    index = torch.where(index >= n, 2 * n - 1 - index, index).clamp(0, n - 1)
    return x[..., index]


def kaldi_fbank(waveforms: Tensor, options: FbankOptions = FbankOptions()) -> Tensor:
    """waveforms [B, S] (or [S]) at Kaldi's scale (int16 range) -> [B, T, M] log mel energies.

    T = 1 + (S - window) // shift, 0 when S is shorter than one window (snip_edges); else
    (S + shift // 2) // shift."""
    options.check()
    squeeze = waveforms.dim() == 1
    x = waveforms.unsqueeze(0) if squeeze else waveforms
    x = x.to(torch.float64) if waveforms.dtype == torch.float64 else x.float()
    frames = options.num_frames(x.shape[-1])
    if frames == 0:
        out = x.new_zeros(x.shape[0], 0, options.num_mel_bins)
        return out[0] if squeeze else out
    if not options.snip_edges:
        x = _mirrored(x, options, frames)
    x = x.unfold(-1, options.window_size, options.window_shift)[:, :frames]  # [B, T, window]
    if options.remove_dc_offset:
        x = x - x.mean(dim=-1, keepdim=True)
    if options.preemphasis:
        previous = torch.cat([x[..., :1], x[..., :-1]], dim=-1)
        x = x - options.preemphasis * previous
    x = x * _window(options, x.device, x.dtype)
    power = torch.fft.rfft(x, n=options.padded_size).abs().pow(2.0)  # zero padding to padded_size
    energies = power @ kaldi_mel_banks(options).to(x.device, x.dtype).T
    out = torch.clamp(energies, min=EPSILON).log()
    return out[0] if squeeze else out


def centered_fbank(waveforms: Tensor, options: FbankOptions = FbankOptions()) -> Tensor:
    """[B, S] samples in [-1, 1] -> [B, T, M]: Kaldi fbank of the int16-scaled audio, minus each
    utterance's mean frame (WeSpeaker's cepstral mean normalisation, over the whole input)."""
    features = kaldi_fbank(waveforms * (1 << 15), options)
    return features - features.mean(dim=-2, keepdim=True)
