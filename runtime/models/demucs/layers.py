"""The convolution blocks both HTDemucs branches are made of.

Shapes: B batch, C channels, Fr frequency bins, T time steps. A frequency-branch layer convolves
[B, C, Fr, T] along Fr only (kernels [K, 1]); a time-branch layer convolves [B, C, T]. Module and
parameter names follow demucs (``conv``, ``norm1``, ``rewrite``, ``norm2``, ``dconv.layers.N.I``)
so the converter's table is the identity.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class LayerScale(nn.Module):
    """A learnt per-channel scale of a residual branch; channels on dim 1, or last."""

    def __init__(self, channels: int, channel_last: bool = False):
        super().__init__()
        self.channel_last = channel_last
        self.scale = nn.Parameter(torch.empty(channels))

    def forward(self, x: Tensor) -> Tensor:
        return self.scale * x if self.channel_last else x.mul_(self.scale[:, None])  # x: a fresh GLU output


def _norm(groups: int, channels: int, enabled: bool) -> nn.Module:
    return nn.GroupNorm(groups, channels) if enabled else nn.Identity()


class DConv(nn.Module):
    """[B, C, T] -> [B, C, T]: ``depth`` residual branches, each a dilated conv (dilation 2^d)
    down to C / compress channels, GroupNorm, GELU, a 1x1 conv to 2C, GroupNorm, GLU, LayerScale.
    The indices inside each branch (0, 1, 3, 4, 6) are demucs' ``nn.Sequential`` positions."""

    def __init__(self, channels: int, compress: float, depth: int, kernel: int = 3):
        super().__init__()
        hidden = int(channels / compress)
        dilate = depth > 0
        self.layers = nn.ModuleList()
        for d in range(abs(depth)):
            dilation = 2**d if dilate else 1
            self.layers.append(
                nn.Sequential(
                    nn.Conv1d(channels, hidden, kernel, dilation=dilation, padding=dilation * (kernel // 2)),
                    nn.GroupNorm(1, hidden),
                    nn.GELU(),
                    nn.Conv1d(hidden, 2 * channels, 1),
                    nn.GroupNorm(1, 2 * channels),
                    nn.GLU(1),
                    LayerScale(channels),
                )
            )

    def forward(self, x: Tensor) -> Tensor:
        """In place on ``x``: inference only, and callers pass a tensor nothing else holds."""
        for layer in self.layers:
            x = x.add_(layer(x))
        return x


def _dconv_over_freq(dconv: DConv, y: Tensor) -> Tensor:
    """DConv along time for each frequency row of [B, C, Fr, T]."""
    B, C, Fr, T = y.shape
    y = dconv(y.permute(0, 2, 1, 3).reshape(-1, C, T))
    return y.view(B, Fr, C, T).permute(0, 2, 1, 3)


class HEncLayer(nn.Module):
    """Encoder layer: strided conv, (norm, GELU, DConv, 1x1 rewrite to 2C, norm, GLU).

    freq: [B, C_in, Fr, T] -> [B, C_out, Fr / stride, T]; time: [B, C_in, T] -> [B, C_out, T / stride]
    (the time input is zero-padded on the right to a multiple of the stride). ``empty``: the conv
    alone, the time layer whose output is injected into the frequency branch where they merge.
    """

    def __init__(self, chin: int, chout: int, *, kernel_size: int, stride: int, freq: bool, pad: bool, norm: bool,
                 norm_groups: int, rewrite: bool, dconv: bool, dconv_depth: int, dconv_comp: float,
                 context: int = 0, empty: bool = False):
        super().__init__()
        self.freq, self.stride, self.empty = freq, stride, empty
        padding = kernel_size // 4 if pad else 0
        if freq:
            self.conv = nn.Conv2d(chin, chout, (kernel_size, 1), (stride, 1), (padding, 0))
        else:
            self.conv = nn.Conv1d(chin, chout, kernel_size, stride, padding)
        if empty:
            return
        self.norm1 = _norm(norm_groups, chout, norm)
        conv = nn.Conv2d if freq else nn.Conv1d
        self.rewrite = conv(chout, 2 * chout, 1 + 2 * context, 1, context) if rewrite else None
        if rewrite:
            self.norm2 = _norm(norm_groups, 2 * chout, norm)
        self.dconv = DConv(chout, dconv_comp, dconv_depth) if dconv else None

    def forward(self, x: Tensor, inject: Tensor | None = None) -> Tensor:
        if not self.freq:
            if x.dim() == 4:
                x = x.reshape(x.shape[0], -1, x.shape[-1])
            rest = x.shape[-1] % self.stride
            if rest:
                x = F.pad(x, (0, self.stride - rest))
        y = self.conv(x)
        if self.empty:
            return y
        if inject is not None:
            y = y + (inject[:, :, None] if inject.dim() == 3 and y.dim() == 4 else inject)
        y = F.gelu(self.norm1(y))
        if self.dconv is not None:
            y = _dconv_over_freq(self.dconv, y) if self.freq else self.dconv(y)
        if self.rewrite is None:
            return y
        return F.glu(self.norm2(self.rewrite(y)), dim=1)


class HDecLayer(nn.Module):
    """Decoder layer: add the skip, (1x1-with-context rewrite to 2C, norm, GLU, DConv), transposed
    conv, norm, GELU unless last. Returns (output, the input of the transposed conv): the latter
    feeds the time branch where the two split. freq: [B, C_in, Fr, T] -> [B, C_out, Fr * stride, T];
    time: [B, C_in, T] -> [B, C_out, length]."""

    def __init__(self, chin: int, chout: int, *, kernel_size: int, stride: int, freq: bool, pad: bool, norm: bool,
                 norm_groups: int, rewrite: bool, dconv: bool, dconv_depth: int, dconv_comp: float,
                 context: int = 1, last: bool = False, empty: bool = False):
        super().__init__()
        self.freq, self.chin, self.last, self.empty = freq, chin, last, empty
        self.pad = kernel_size // 4 if pad else 0
        if freq:
            self.conv_tr = nn.ConvTranspose2d(chin, chout, (kernel_size, 1), (stride, 1))
        else:
            self.conv_tr = nn.ConvTranspose1d(chin, chout, kernel_size, stride)
        self.norm2 = _norm(norm_groups, chout, norm)
        if empty:
            return
        conv = nn.Conv2d if freq else nn.Conv1d
        self.rewrite = conv(chin, 2 * chin, 1 + 2 * context, 1, context) if rewrite else None
        if rewrite:
            self.norm1 = _norm(norm_groups, 2 * chin, norm)
        self.dconv = DConv(chin, dconv_comp, dconv_depth) if dconv else None

    def forward(self, x: Tensor, skip: Tensor | None, length: int) -> tuple[Tensor, Tensor]:
        if self.freq and x.dim() == 3:
            x = x.view(x.shape[0], self.chin, -1, x.shape[-1])
        if self.empty:
            y = x
        else:
            x = x + skip if x is skip else x.add_(skip)  # x: the previous layer's fresh output
            y = F.glu(self.norm1(self.rewrite(x)), dim=1) if self.rewrite is not None else x
            if self.dconv is not None:
                y = _dconv_over_freq(self.dconv, y) if self.freq else self.dconv(y)
        z = self.norm2(self.conv_tr(y))
        if self.freq:
            if self.pad:
                z = z[..., self.pad : -self.pad, :]
        else:
            z = z[..., self.pad : self.pad + length]
        if not self.last:
            z = F.gelu(z)
        return z, y
