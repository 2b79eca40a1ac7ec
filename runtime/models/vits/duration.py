"""VITS duration predictors: log-durations [B, 1, T] of each phoneme from the text encoding.

The stochastic one (``StochasticDurationPredictor``) is a normalising flow run in reverse: noise
[B, 2, T] (scaled by ``noise_w``; zero gives its mode) goes back through Flip / ConvFlow pairs and
an elementwise affine; its first channel is the log-duration. Training ran it forwards through
one more ConvFlow (index 1) that inference skips; exports leave it out, and so does this module,
whose flows keep their training indices (0, 3, 5, 7) so the weights keep their names.
The deterministic one (``DurationPredictor``) is two conv + ReLU + norm layers and a projection.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .text_encoder import ChannelNorm

SPLINE_BINS = 10  # ConvFlow: rational-quadratic spline bins
TAIL_BOUND = 5.0  # the spline maps [-5, 5] onto itself and is the identity outside
MIN_BIN = 1e-3  # minimal bin width, height and knot derivative
# Unnormalised derivative whose softplus + MIN_BIN is 1: the linear tails' slope at the outer knots.
TAIL_DERIVATIVE = math.log(math.exp(1 - MIN_BIN) - 1)


class DDSConv(nn.Module):
    """Dilated depth-separable convolutions, residual: [B, C, T] -> [B, C, T]; dilation k**i."""

    def __init__(self, channels: int, kernel_size: int, n_layers: int):
        super().__init__()
        self.convs_sep = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel_size, groups=channels, dilation=kernel_size**i,
                      padding=(kernel_size**i * (kernel_size - 1)) // 2)
            for i in range(n_layers)
        )
        self.convs_1x1 = nn.ModuleList(nn.Conv1d(channels, channels, 1) for _ in range(n_layers))
        self.norms_1 = nn.ModuleList(ChannelNorm(channels) for _ in range(n_layers))
        self.norms_2 = nn.ModuleList(ChannelNorm(channels) for _ in range(n_layers))

    def forward(self, x: Tensor, g: Tensor | None = None) -> Tensor:
        if g is not None:
            x = x + g
        for sep, norm1, pointwise, norm2 in zip(self.convs_sep, self.norms_1, self.convs_1x1, self.norms_2):
            y = F.gelu(norm1(sep(x)))
            x = x + F.gelu(norm2(pointwise(y)))
        return x


class ElementwiseAffine(nn.Module):
    """y = m + exp(logs) * x per channel; run in reverse: x = (y - m) * exp(-logs)."""

    def __init__(self, channels: int):
        super().__init__()
        self.m = nn.Parameter(torch.zeros(channels, 1))
        self.logs = nn.Parameter(torch.zeros(channels, 1))

    def reverse(self, x: Tensor, g: Tensor | None = None) -> Tensor:
        return (x - self.m) * torch.exp(-self.logs)


class ConvFlow(nn.Module):
    """Coupling by a monotonic rational-quadratic spline of the second half, conditioned on the first."""

    def __init__(self, channels: int, filter_channels: int, kernel_size: int, n_layers: int = 3):
        super().__init__()
        self.half = channels // 2
        self.filter_channels = filter_channels
        self.pre = nn.Conv1d(self.half, filter_channels, 1)
        self.convs = DDSConv(filter_channels, kernel_size, n_layers)
        self.proj = nn.Conv1d(filter_channels, self.half * (3 * SPLINE_BINS - 1), 1)

    def reverse(self, x: Tensor, g: Tensor | None = None) -> Tensor:
        x0, x1 = x.split(self.half, dim=1)
        h = self.proj(self.convs(self.pre(x0), g))
        b, c, t = x0.shape
        h = h.reshape(b, c, -1, t).permute(0, 1, 3, 2)  # [B, c, T, 3 * bins - 1]
        scale = math.sqrt(self.filter_channels)
        widths, heights = h[..., :SPLINE_BINS] / scale, h[..., SPLINE_BINS : 2 * SPLINE_BINS] / scale
        x1 = inverse_spline(x1, widths, heights, h[..., 2 * SPLINE_BINS :])
        return torch.cat([x0, x1], dim=1)


def _knots(unnormalized: Tensor) -> Tensor:
    """Bin sizes (softmax, floored at MIN_BIN) -> their cumulative knots on [-B, B], ends exact."""
    bins = unnormalized.shape[-1]
    sizes = MIN_BIN + (1 - MIN_BIN * bins) * unnormalized.softmax(dim=-1)
    knots = F.pad(sizes.cumsum(dim=-1), (1, 0)) * (2 * TAIL_BOUND) - TAIL_BOUND
    knots[..., 0] = -TAIL_BOUND
    knots[..., -1] = TAIL_BOUND
    return knots


def inverse_spline(y: Tensor, widths: Tensor, heights: Tensor, derivatives: Tensor) -> Tensor:
    """The x whose spline value is y (Durkan et al. 2019, linear tails); identity outside the bound.

    y [...]; widths, heights [..., bins]; derivatives [..., bins - 1] (the inner knots').
    """
    inside = (y >= -TAIL_BOUND) & (y <= TAIL_BOUND)
    derivatives = F.pad(derivatives, (1, 1), value=TAIL_DERIVATIVE)
    cum_w, cum_h = _knots(widths), _knots(heights)
    w, h = cum_w[..., 1:] - cum_w[..., :-1], cum_h[..., 1:] - cum_h[..., :-1]
    d = MIN_BIN + F.softplus(derivatives)
    # The bin holding y: knots at or below it, the last knot nudged up so y = B falls in the last bin.
    edges = cum_h.clone()
    edges[..., -1] += 1e-6
    k = ((y[..., None] >= edges).sum(dim=-1) - 1).clamp(0, w.shape[-1] - 1)[..., None]

    def at(t: Tensor) -> Tensor:
        return t.gather(-1, k)[..., 0]

    x_k, y_k, w_k, h_k = at(cum_w), at(cum_h), at(w), at(h)
    delta = h_k / w_k
    d_k, d_k1 = at(d), d[..., 1:].gather(-1, k)[..., 0]
    dy = y - y_k
    s = d_k + d_k1 - 2 * delta
    a = dy * s + h_k * (delta - d_k)
    b = h_k * d_k - dy * s
    c = -delta * dy
    root = (2 * c) / (-b - torch.sqrt(b.pow(2) - 4 * a * c))
    return torch.where(inside, root * w_k + x_k, y)


class StochasticDurationPredictor(nn.Module):
    """(hidden [B, H, T], speaker [B, G, 1] | None, noise [B, 2, T]) -> log-durations [B, 1, T]."""

    def __init__(self, channels: int, filter_channels: int, kernel_size: int, n_flows: int, gin_channels: int = 0):
        super().__init__()
        self.pre = nn.Conv1d(channels, filter_channels, 1)
        self.proj = nn.Conv1d(filter_channels, filter_channels, 1)
        self.convs = DDSConv(filter_channels, kernel_size, 3)
        if gin_channels:
            self.cond = nn.Conv1d(gin_channels, filter_channels, 1)
        flows = {"0": ElementwiseAffine(2)}
        for i in range(n_flows - 1):  # training's flows 3, 5, 7 (1 is skipped at inference; 2, 4, 6, 8 are flips)
            flows[str(2 * i + 3)] = ConvFlow(2, filter_channels, kernel_size)
        self.flows = nn.ModuleDict(flows)

    def forward(self, x: Tensor, g: Tensor | None, noise: Tensor) -> Tensor:
        x = self.pre(x)
        if g is not None:
            x = x + self.cond(g)
        x = self.proj(self.convs(x))
        z = noise
        for name in reversed(list(self.flows)):
            # Every flow was followed by a Flip in training (the affine, by the skipped flow's).
            z = self.flows[name].reverse(z.flip(1), x)
        return z[:, :1]


class DurationPredictor(nn.Module):
    """(hidden [B, H, T], speaker [B, G, 1] | None) -> log-durations [B, 1, T]."""

    def __init__(self, channels: int, filter_channels: int, kernel_size: int, gin_channels: int = 0):
        super().__init__()
        self.conv_1 = nn.Conv1d(channels, filter_channels, kernel_size, padding=kernel_size // 2)
        self.norm_1 = ChannelNorm(filter_channels)
        self.conv_2 = nn.Conv1d(filter_channels, filter_channels, kernel_size, padding=kernel_size // 2)
        self.norm_2 = ChannelNorm(filter_channels)
        self.proj = nn.Conv1d(filter_channels, 1, 1)
        if gin_channels:
            self.cond = nn.Conv1d(gin_channels, channels, 1)

    def forward(self, x: Tensor, g: Tensor | None, noise: Tensor | None = None) -> Tensor:
        if g is not None:
            x = x + self.cond(g)
        x = self.norm_1(torch.relu(self.conv_1(x)))
        x = self.norm_2(torch.relu(self.conv_2(x)))
        return self.proj(x)
