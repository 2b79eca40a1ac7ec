"""HTDemucs' STFT framing: frames that line up exactly with the time branch's strides.

The hop is nfft / 4. The signal is reflect-padded by 1.5 hops on the left and, on the right, by
1.5 hops plus what rounds its length up to whole hops; torch's centred, normalised STFT of that
gives le + 4 frames, of which the 2 at each end are dropped, and the Nyquist bin is dropped too:
[..., nfft / 2, le] for a signal of le hops. The inverse pads the bin and the four frames back
with zeros and keeps the samples between the same pads.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor


def reflect_pad(x: Tensor, left: int, right: int) -> Tensor:
    """F.pad(mode="reflect") that also takes a signal no longer than the padding (zeros are added
    on the right first, as demucs' pad1d does)."""
    length = x.shape[-1]
    biggest = max(left, right)
    if length <= biggest:
        extra = biggest - length + 1
        extra_right = min(right, extra)
        extra_left = extra - extra_right
        left, right = left - extra_left, right - extra_right
        x = F.pad(x, (extra_left, extra_right))
    return F.pad(x, (left, right), mode="reflect")


def spectrogram(x: Tensor, nfft: int) -> Tensor:
    """[..., L] real -> [..., nfft / 2, ceil(L / hop)] complex."""
    hop = nfft // 4
    frames = math.ceil(x.shape[-1] / hop)
    pad = hop // 2 * 3
    x = reflect_pad(x, pad, pad + frames * hop - x.shape[-1])
    *other, length = x.shape
    z = torch.stft(
        x.reshape(-1, length), nfft, hop, window=torch.hann_window(nfft, device=x.device, dtype=x.dtype),
        win_length=nfft, normalized=True, center=True, return_complex=True, pad_mode="reflect",
    )
    z = z.view(*other, *z.shape[-2:])[..., :-1, :]
    return z[..., 2 : 2 + frames]


def inverse_spectrogram(z: Tensor, length: int) -> Tensor:
    """[..., nfft / 2, frames] complex -> [..., length] real."""
    nfft = 2 * z.shape[-2]
    hop = nfft // 4
    z = F.pad(F.pad(z, (0, 0, 0, 1)), (2, 2))
    pad = hop // 2 * 3
    total = hop * math.ceil(length / hop) + 2 * pad
    *other, freqs, frames = z.shape
    x = torch.istft(
        z.reshape(-1, freqs, frames), nfft, hop, window=torch.hann_window(nfft, device=z.device, dtype=z.real.dtype),
        win_length=nfft, normalized=True, length=total, center=True,
    )
    return x.view(*other, total)[..., pad : pad + length]
