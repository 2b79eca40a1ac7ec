"""icefall's Zipformer2 encoder (``zipformer.py``, ``subsampling.py``, ``scaling.py``) for inference.

Module and parameter names follow icefall's so its state dicts load one to one. What icefall
builds only to train (balancers, whiteners, dropout and layer-skip schedules, feature masks) has
no effect in eval mode and is not built. Every row of a batch has the same length here (the model
encodes rows of different lengths apart), so no padding mask is needed. Layout is batch-first:
B batch, T frames, C channels, H heads.

On the CPU the largest intermediates (the front's convs, ConvNeXt's wide middle, the attention
scores) are built a block of frames at a time: a fresh tensor of hundreds of MB has its pages
faulted in at every call (800k faults for 60 s of audio, more system time than the attention's
arithmetic took).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..time_conv import depthwise_over_time
from .config import ZipformerConfig

BLOCK_ELEMENTS = 1 << 20  # elements a block's largest intermediates reach: 4 MB in float32


def block_rows(x: Tensor, row_elements: int, rows: int) -> int:
    """Rows (of ``row_elements`` each) per block for ``BLOCK_ELEMENTS``; elsewhere than on the CPU
    all ``rows`` at once: a GPU's caching allocator keeps its memory, and a block costs launches."""
    if x.device.type != "cpu":
        return rows
    return max(1, BLOCK_ELEMENTS // row_elements)


def swoosh_l(x: Tensor) -> Tensor:
    """log(1 + exp(x - 4)) - 0.08 x - 0.035."""
    return F.softplus(x - 4.0).sub_(0.08 * x).sub_(0.035)  # in place: two fewer temporaries as big as x


def swoosh_r(x: Tensor) -> Tensor:
    """log(1 + exp(x - 1)) - 0.08 x - 0.313261687."""
    return F.softplus(x - 1.0).sub_(0.08 * x).sub_(0.313261687)


class BiasNorm(nn.Module):
    """x / rms(x - bias) * exp(log_scale), over the channel axis (the last)."""

    def __init__(self, channels: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(channels))
        self.log_scale = nn.Parameter(torch.tensor(1.0))

    def forward(self, x: Tensor) -> Tensor:
        return x * (torch.mean((x - self.bias) ** 2, dim=-1, keepdim=True) ** -0.5 * self.log_scale.exp())


class ConvNeXt(nn.Module):
    """The front's residual block: depthwise 7x7, pointwise up 3x, SwooshL, pointwise down.

    Past the depthwise conv every frame is its own, so the 3x-wide middle is built a block of
    frames at a time, not whole (87 MB at 60 s, several times over)."""

    def __init__(self, channels: int):
        super().__init__()
        self.depthwise_conv = nn.Conv2d(channels, channels, (7, 7), padding=(3, 3), groups=channels)
        self.pointwise_conv1 = nn.Conv2d(channels, 3 * channels, 1)
        self.pointwise_conv2 = nn.Conv2d(3 * channels, channels, 1)

    def forward(self, x: Tensor) -> Tensor:
        """x [B, C, T, F] -> [B, C, T, F]."""
        b, c, t, f = x.shape
        out = self.depthwise_conv(x)
        rows = block_rows(x, b * 3 * c * f, t)
        for start in range(0, t, rows):
            block = out[:, :, start : start + rows]  # these frames of the depthwise output, overwritten once read
            y = self.pointwise_conv2(swoosh_l(self.pointwise_conv1(block)))
            block.copy_(y.add_(x[:, :, start : start + rows]))
        return out


class Conv2dSubsampling(nn.Module):
    """[B, T, F] -> [B, (T - 7) // 2, C]: three convs (SwooshR after each), ConvNeXt, a linear, BiasNorm.

    ``conv`` keeps icefall's Sequential indices (0, 4, 7) so the names match; the slots between
    held training-only modules. The three convs run a block of output frames at a time, each
    block from its own input frames: whole, each conv and its SwooshR made several fresh 15-30 MB
    tensors at 60 s."""

    def __init__(self, cfg: ZipformerConfig):
        super().__init__()
        c1, c2, c3 = cfg.embed_channels
        slots: list[nn.Module] = [nn.Identity() for _ in range(8)]
        slots[0] = nn.Conv2d(1, c1, 3, padding=(0, 1))
        slots[4] = nn.Conv2d(c1, c2, 3, stride=2)
        slots[7] = nn.Conv2d(c2, c3, 3, stride=(1, 2))
        self.conv = nn.Sequential(*slots)
        self.convnext = ConvNeXt(c3)
        self.width = (((cfg.n_mels - 1) // 2) - 1) // 2  # bins left after the two stride-2 convs
        self.out = nn.Linear(self.width * c3, cfg.encoder_dim[0])
        self.out_norm = BiasNorm(cfg.encoder_dim[0])

    def convs(self, x: Tensor) -> Tensor:
        """[B, T, F] -> [B, C, (T - 7) // 2, width]."""
        x = x.unsqueeze(1)
        b, t = x.shape[0], (x.shape[2] - 7) // 2
        out = x.new_empty(b, self.conv[7].out_channels, t, self.width)
        rows = block_rows(x, b * out.shape[1] * self.width, t)
        for start in range(0, t, rows):
            end = min(start + rows, t)
            # output frame o reads input frames 2o .. 2o + 8 (kernels of 3, the middle one of stride 2)
            y = x[:, :, 2 * start : 2 * end + 7]
            for i in (0, 4, 7):
                y = swoosh_r(self.conv[i](y))
            out[:, :, start:end] = y
        return out

    def forward(self, x: Tensor) -> Tensor:
        x = self.convnext(self.convs(x))
        b, c, t, f = x.shape
        return self.out_norm(self.out(x.transpose(1, 2).reshape(b, t, c * f)))


def compact_positions(length: int, dim: int, device) -> Tensor:
    """icefall's CompactRelPositionalEncoding for offsets -(T-1) .. T-1: [2T-1, dim]. Offsets are
    log-compressed beyond sqrt(dim), then squashed by atan before the Fourier features; the last
    column is a constant 1 (a bias)."""
    x = torch.arange(-(length - 1), length, device=device, dtype=torch.float32).unsqueeze(1)
    freqs = 1 + torch.arange(dim // 2, device=device)
    compression = dim**0.5
    compressed = compression * x.sign() * ((x.abs() + compression).log() - math.log(compression))
    angles = (compressed / (dim / (2.0 * math.pi))).atan() * freqs
    pe = torch.empty(x.shape[0], dim, device=device)
    pe[:, 0::2] = angles.cos()
    pe[:, 1::2] = angles.sin()
    pe[:, -1] = 1.0
    return pe


class RelPositionMultiheadAttentionWeights(nn.Module):
    """Attention weights [B, H, T, T] from query-key scores plus query-position scores.

    On the CPU the weights are built a block of one head's query rows at a time: a block's
    scores [rows, T] and position scores [rows, T + rows - 1] are the largest transients, where
    whole they were [B, H, T, T] and [B, H, T, 2T - 1] (144 and 288 MB a layer at 60 s)."""

    def __init__(self, dim: int, pos_dim: int, heads: int, query_head_dim: int, pos_head_dim: int):
        super().__init__()
        self.heads, self.q, self.p = heads, query_head_dim, pos_head_dim
        self.in_proj = nn.Linear(dim, (2 * query_head_dim + pos_head_dim) * heads)
        self.linear_pos = nn.Linear(pos_dim, heads * pos_head_dim, bias=False)

    def forward(self, x: Tensor, pos: Tensor, out: Tensor | None = None) -> Tensor:
        """x [B, T, C], pos [2T-1, pos_dim] (offsets -(T-1) .. T-1) -> [B, H, T, T], into ``out`` if given."""
        b, t, _ = x.shape
        h, qd = self.heads, self.q * self.heads
        x = self.in_proj(x)
        q = x[..., :qd].reshape(b, t, h, self.q).transpose(1, 2)
        k = x[..., qd : 2 * qd].reshape(b, t, h, self.q).permute(0, 2, 3, 1)
        p = x[..., 2 * qd :].reshape(b, t, h, self.p).transpose(1, 2)
        pe = self.linear_pos(pos).reshape(2 * t - 1, h, self.p).permute(1, 2, 0)  # [H, p, 2T-1]
        weights = x.new_empty(b, h, t, t) if out is None else out
        if x.device.type != "cpu":  # all rows and heads at once
            _attention_rows(q, k, p, pe, 0, t, weights)
            return weights
        # On the CPU, one head of one batch row at a time: a block of its query rows is contiguous in
        # ``weights``, so the softmax writes it in place (across heads it would be copied)
        rows = block_rows(x, 2 * t, t)  # a row's scores and position scores
        for i in range(b):
            for j in range(h):
                for start in range(0, t, rows):
                    _attention_rows(q[i, j], k[i, j], p[i, j], pe[j], start, min(start + rows, t), weights[i, j])
        return weights


def _attention_rows(q: Tensor, k: Tensor, p: Tensor, pe: Tensor, start: int, end: int, out: Tensor) -> None:
    """Softmax of query rows start..end's scores into those rows of ``out`` [..., T, T]: q [..., T, d],
    k [..., d, T], p [..., T, pd] the query-position projections, pe [..., pd, 2T-1]."""
    t, n = k.shape[-1], end - start
    scores = q[..., start:end, :] @ k
    # query i, key j reads offset j - i, at column (T - 1) - i + j of pe: these rows need columns
    # T - end .. 2T - 2 - start, and each row's view starts one column left of the one before
    pos_scores = (p[..., start:end, :] @ pe[..., t - end : 2 * t - 1 - start]).contiguous()
    s = pos_scores.stride()
    scores += pos_scores.as_strided(scores.shape, (*s[:-2], s[-2] - s[-1], s[-1]), s[-1] * (n - 1))
    torch.softmax(scores, dim=-1, out=out[..., start:end, :])


class SelfAttention(nn.Module):
    """Values mixed by precomputed weights."""

    def __init__(self, dim: int, heads: int, value_head_dim: int):
        super().__init__()
        self.heads = heads
        self.in_proj = nn.Linear(dim, heads * value_head_dim)
        self.out_proj = nn.Linear(heads * value_head_dim, dim)

    def forward(self, x: Tensor, weights: Tensor) -> Tensor:
        b, t, _ = x.shape
        v = self.in_proj(x).reshape(b, t, self.heads, -1).transpose(1, 2)
        return self.out_proj((weights @ v).transpose(1, 2).reshape(b, t, -1))


class NonlinAttention(nn.Module):
    """A gated mix by the first head's weights: out((w0 @ (x * tanh(s))) * y)."""

    def __init__(self, dim: int):
        super().__init__()
        hidden = 3 * dim // 4
        self.in_proj = nn.Linear(dim, 3 * hidden)
        self.out_proj = nn.Linear(hidden, dim)

    def forward(self, x: Tensor, weights: Tensor) -> Tensor:
        s, x, y = self.in_proj(x).chunk(3, dim=-1)
        x = weights[:, 0] @ (x * torch.tanh(s))
        return self.out_proj(x * y)


class FeedforwardModule(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.in_proj = nn.Linear(dim, hidden)
        self.out_proj = nn.Linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.out_proj(swoosh_l(self.in_proj(x)))


class ConvolutionModule(nn.Module):
    """Gated linear unit, depthwise conv over time, SwooshR, linear."""

    def __init__(self, dim: int, kernel: int):
        super().__init__()
        self.in_proj = nn.Linear(dim, 2 * dim)
        self.depthwise_conv = nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=dim)
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        x, s = self.in_proj(x).chunk(2, dim=-1)
        return self.out_proj(swoosh_r(depthwise_over_time(self.depthwise_conv, x * torch.sigmoid(s))))


class BypassModule(nn.Module):
    """orig + (x - orig) * scale, a learnt per-channel scale."""

    def __init__(self, dim: int):
        super().__init__()
        self.bypass_scale = nn.Parameter(torch.full((dim,), 0.5))

    def forward(self, orig: Tensor, x: Tensor) -> Tensor:
        return orig + (x - orig) * self.bypass_scale


class ZipformerEncoderLayer(nn.Module):
    def __init__(self, cfg: ZipformerConfig, i: int):
        super().__init__()
        dim, ff, heads = cfg.encoder_dim[i], cfg.feedforward_dim[i], cfg.num_heads[i]
        self.bypass = BypassModule(dim)
        self.bypass_mid = BypassModule(dim)
        self.self_attn_weights = RelPositionMultiheadAttentionWeights(
            dim, cfg.pos_dim, heads, cfg.query_head_dim[i], cfg.pos_head_dim[i]
        )
        self.self_attn1 = SelfAttention(dim, heads, cfg.value_head_dim[i])
        self.self_attn2 = SelfAttention(dim, heads, cfg.value_head_dim[i])
        self.feed_forward1 = FeedforwardModule(dim, ff * 3 // 4)
        self.feed_forward2 = FeedforwardModule(dim, ff)
        self.feed_forward3 = FeedforwardModule(dim, ff * 5 // 4)
        self.nonlin_attention = NonlinAttention(dim)
        self.conv_module1 = ConvolutionModule(dim, cfg.cnn_module_kernel[i])
        self.conv_module2 = ConvolutionModule(dim, cfg.cnn_module_kernel[i])
        self.norm = BiasNorm(dim)

    def forward(self, src: Tensor, pos: Tensor, weights: Tensor | None = None) -> Tensor:
        """``weights``: a [B, H, T, T] buffer for the attention weights, used only within this call."""
        orig = src
        weights = self.self_attn_weights(src, pos, weights)
        src = src + self.feed_forward1(src)
        src = src + self.nonlin_attention(src, weights)
        src = src + self.self_attn1(src, weights)
        src = src + self.conv_module1(src)
        src = src + self.feed_forward2(src)
        src = self.bypass_mid(orig, src)
        src = src + self.self_attn2(src, weights)
        src = src + self.conv_module2(src)
        src = src + self.feed_forward3(src)
        return self.bypass(orig, self.norm(src))


class ZipformerEncoder(nn.Module):
    """One stack of layers at one frame rate, sharing its position encoding."""

    def __init__(self, cfg: ZipformerConfig, i: int):
        super().__init__()
        self.pos_dim, self.heads = cfg.pos_dim, cfg.num_heads[i]
        self.layers = nn.ModuleList(ZipformerEncoderLayer(cfg, i) for _ in range(cfg.num_layers[i]))

    def forward(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        pos = compact_positions(t, self.pos_dim, x.device).to(x.dtype)
        # one buffer for every layer's attention weights, dead once a layer returns: a fresh
        # [B, H, T, T] a layer would have its pages faulted in again each time
        weights = x.new_empty(b, self.heads, t, t)
        for layer in self.layers:
            x = layer(x, pos, weights)
        return x


class SimpleDownsample(nn.Module):
    """[B, T, C] -> [B, ceil(T / ds), C]: a softmax-weighted sum of each ds frames (the last frame repeated to fill)."""

    def __init__(self, downsample: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(downsample))

    def forward(self, x: Tensor) -> Tensor:
        b, t, c = x.shape
        ds = self.bias.shape[0]
        d = (t + ds - 1) // ds
        x = torch.cat([x, x[:, -1:].expand(b, d * ds - t, c)], dim=1)
        return (x.reshape(b, d, ds, c) * self.bias.softmax(0)[:, None]).sum(dim=2)


class DownsampledZipformerEncoder(nn.Module):
    """A stack run at 1/ds of the frame rate, repeated back up and bypass-combined with its input."""

    def __init__(self, cfg: ZipformerConfig, i: int):
        super().__init__()
        self.downsample = SimpleDownsample(cfg.downsampling_factor[i])
        self.encoder = ZipformerEncoder(cfg, i)
        self.out_combiner = BypassModule(cfg.encoder_dim[i])

    def forward(self, x: Tensor) -> Tensor:
        ds = self.downsample.bias.shape[0]
        y = self.encoder(self.downsample(x)).repeat_interleave(ds, dim=1)[:, : x.shape[1]]
        return self.out_combiner(x, y)


class Zipformer2(nn.Module):
    """The stacks in order, each fed the previous one's output cut or zero-padded to its width;
    the output takes each channel from the last stack that has it, then halves the frame rate."""

    def __init__(self, cfg: ZipformerConfig):
        super().__init__()
        self.dims = cfg.encoder_dim
        self.encoders = nn.ModuleList(
            ZipformerEncoder(cfg, i) if ds == 1 else DownsampledZipformerEncoder(cfg, i)
            for i, ds in enumerate(cfg.downsampling_factor)
        )
        self.downsample_output = SimpleDownsample(2)

    def forward(self, x: Tensor) -> Tensor:
        """[B, T, C0] -> [B, ceil(T / 2), max(dims)]."""
        outputs = []
        for dim, module in zip(self.dims, self.encoders):
            x = x[..., :dim] if dim <= x.shape[-1] else F.pad(x, (0, dim - x.shape[-1]))
            x = module(x)
            outputs.append(x)
        pieces, have = [outputs[-1]], self.dims[-1]
        for dim, out in zip(reversed(self.dims[:-1]), reversed(outputs[:-1])):
            if dim > have:
                pieces.append(out[..., have:dim])
                have = dim
        return self.downsample_output(torch.cat(pieces, dim=-1) if len(pieces) > 1 else pieces[0])
