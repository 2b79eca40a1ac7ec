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


ROWS_ELEMENTS = 1 << 21  # floats of a DConv branch's widest intermediate per chunk of rows (8 MB)


class DConv(nn.Module):
    """tokens [N, T, C] -> [N, T, C], in place: ``depth`` residual branches, each a dilated conv
    along T (dilation 2^d) down to C / compress channels, GroupNorm(1), GELU, a 1x1 conv to 2C,
    GroupNorm(1), GLU, LayerScale. The indices inside each branch (0, 1, 3, 4, 6) are demucs'
    ``nn.Sequential`` positions; the modules hold the parameters, ``forward`` computes with them.

    Channels last, every conv is a matrix product over the channels and GroupNorm(1) is a
    LayerNorm over (T, C); rows (the frequency rows of a spectral layer) are independent, so they
    are run a chunk at a time: the 2C intermediate stays a few MB, reused from the heap, instead
    of a fresh page-faulted mapping the size of the layer."""

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
        """In place on ``x`` [N, T, C]: inference only, and callers pass a tensor nothing else holds."""
        N, T, C = x.shape
        rows = max(1, ROWS_ELEMENTS // (2 * C * T))
        for a in range(0, N, rows):
            part = x[a : a + rows]
            for layer in self.layers:
                part.add_(_branch(layer, part))
        return x


def _group_norm_1(x: Tensor, norm: nn.GroupNorm) -> Tensor:
    """GroupNorm(1, C) of tokens [N, T, C]: a LayerNorm over (T, C) with per-channel affine. Fused
    into layer_norm the affine is first expanded to [T, C] in memory: cheap for many rows, not for
    the time branch's single long one, which takes it as a second pass."""
    shape = x.shape[1:]
    if x.shape[0] == 1:
        return F.layer_norm(x, shape, eps=norm.eps).mul_(norm.weight).add_(norm.bias)
    return F.layer_norm(x, shape, norm.weight.expand(shape), norm.bias.expand(shape), norm.eps)


def _branch(layer: nn.Sequential, x: Tensor) -> Tensor:
    """One DConv branch on tokens [n, T, C] -> [n, T, C]."""
    conv1, norm1, _, conv2, norm2, _, scale = layer
    d, k = conv1.dilation[0], conv1.kernel_size[0]
    hidden = conv1.out_channels
    taps = F.linear(x, conv1.weight.permute(2, 0, 1).reshape(k * hidden, -1))  # [n, T, k * hidden]: every tap at once
    h = taps[..., (k // 2) * hidden : (k // 2 + 1) * hidden] + conv1.bias
    for i in range(k):
        shift = (i - k // 2) * d  # tap i reads x[t + shift]
        tap = taps[..., i * hidden : (i + 1) * hidden]
        if shift < 0:
            h[:, -shift:] += tap[:, :shift]
        elif shift > 0:
            h[:, :-shift] += tap[:, shift:]
    h = F.gelu(_group_norm_1(h, norm1))
    z = _group_norm_1(F.linear(h, conv2.weight[:, :, 0], conv2.bias), norm2)
    return F.glu(z, dim=-1).mul_(scale.scale)


def _dconv_over_freq(dconv: DConv, y: Tensor) -> Tensor:
    """DConv along time for each frequency row of [B, C, Fr, T], returned channels last."""
    y = y.contiguous(memory_format=torch.channels_last)  # [B, Fr, T, C] in memory: the rows as tokens
    B, C, Fr, T = y.shape
    dconv(y.permute(0, 2, 3, 1).view(B * Fr, T, C))
    return y


def _dconv_over_time(dconv: DConv, y: Tensor) -> Tensor:
    """DConv along time of [B, C, T]."""
    return dconv(y.transpose(1, 2).contiguous()).transpose(1, 2)


def _rewrite_glu(rewrite: nn.Module, norm: nn.Module, y: Tensor) -> Tensor:
    """GLU(norm(rewrite(y))) over channels. A frequency layer without norm (the released models'
    widest ones) is run by slabs of rows, each with the rows its kernel reaches: the 2C
    intermediate stays a few MB instead of twice the layer's size."""
    rows = max(1, ROWS_ELEMENTS // (rewrite.out_channels * y.shape[-1] * y.shape[0]))
    if y.dim() == 3 or rows >= y.shape[2] or not isinstance(norm, nn.Identity):  # a GroupNorm spans every row
        return F.glu(norm(rewrite(y)), dim=1)
    B, C, Fr, T = y.shape
    reach, pad_t = rewrite.padding
    out = torch.empty(B, rewrite.out_channels // 2, Fr, T, dtype=y.dtype, device=y.device, memory_format=torch.channels_last)
    for a in range(0, Fr, rows):
        b = min(a + rows, Fr)
        lo, hi = max(a - reach, 0), min(b + reach, Fr)
        part = F.pad(y[:, :, lo:hi], (0, 0, reach - (a - lo), reach - (hi - b)))  # zeros past the edges
        out[:, :, a:b] = F.glu(F.conv2d(part, rewrite.weight, rewrite.bias, padding=(0, pad_t)), dim=1)
    return out


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
            y = (_dconv_over_freq if self.freq else _dconv_over_time)(self.dconv, y)
        if self.rewrite is None:
            return y
        return _rewrite_glu(self.rewrite, self.norm2, y)


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
            y = _rewrite_glu(self.rewrite, self.norm1, x) if self.rewrite is not None else x
            if self.dconv is not None:
                y = (_dconv_over_freq if self.freq else _dconv_over_time)(self.dconv, y)
        z = self.norm2(self.conv_tr(y))
        if self.freq:
            if self.pad:
                z = z[..., self.pad : -self.pad, :]
        else:
            z = z[..., self.pad : self.pad + length]
        if not self.last:
            z = F.gelu(z)
        return z, y
