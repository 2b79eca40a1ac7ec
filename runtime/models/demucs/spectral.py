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

FRAMES_ELEMENTS = 1 << 21  # samples of inverse-transformed frames at a time (8 MB of float32)


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
    """[B, nfft / 2, frames, K] complex -> [B, K, length] real: ``torch.istft`` of each of the K
    spectrograms padded back as above, computed on this layout (the decoder's, channels last)
    without transposing it: an inverse real FFT across the bins (which supplies the zero Nyquist
    bin), the window, and the overlap-add of each frame's four hop-long quarters, a chunk of
    frames at a time; the four zero frames add nothing to the signal, only to the window
    envelope it is divided by."""
    B, freqs, frames, K = z.shape
    nfft = 2 * freqs
    hop = nfft // 4
    window = torch.hann_window(nfft, device=z.device, dtype=z.real.dtype)
    scaled = window[:, None] * math.sqrt(nfft)  # sqrt(nfft): normalized=True
    out = window.new_zeros(B, frames + 3, hop, K)  # frame t starts at quarter t
    step = max(1, FRAMES_ELEMENTS // (nfft * K * B))
    for a in range(0, frames, step):  # a few MB at a time, not the whole spectrogram's size
        x = torch.fft.irfft(z[:, :, a : a + step].transpose(1, 2), n=nfft, dim=2)  # [B, f, nfft, K]
        x = x.mul_(scaled).view(B, -1, 4, hop, K)
        for q in range(4):
            out[:, a + q : a + q + x.shape[1]] += x[:, :, q]
    square = (window * window).view(4, hop)
    envelope = square.new_zeros(frames + 7, hop)  # with the two zero frames either side
    for q in range(4):
        envelope[q : q + frames + 4] += square[q]
    pad = hop // 2 * 3
    signal = out.view(B, -1, K)[:, pad : pad + length]
    return (signal / envelope.view(-1, 1)[2 * hop + pad : 2 * hop + pad + length]).transpose(1, 2)
