"""The (Fast)Conformer encoder: convolutional subsampling, then Conformer blocks.

Module and parameter names follow NeMo's ``ConformerEncoder`` so NeMo state dicts load one to
one. Shapes: B batch, T frames, F mel channels, C model width, H heads, D head size.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..time_conv import depthwise_over_time
from .config import FastConformerConfig


def conv_output_lengths(lengths, layers: int, kernel: int = 3, stride: int = 2):
    """Frames (a tensor or an int) left after ``layers`` stride-2 convolutions padded by
    (kernel - 1) // 2 per side."""
    pad = (kernel - 1) // 2
    for _ in range(layers):
        lengths = (lengths + 2 * pad - kernel) // stride + 1
    return lengths


class ConvSubsampling(nn.Module):
    """NeMo's ``ConvSubsampling``: [B, T, F] -> [B, T / factor, C].

    ``dw_striding`` (FastConformer): a full 3x3 stride-2 conv, then depthwise stride-2 + pointwise
    pairs; ``striding`` (Conformer): full 3x3 stride-2 convs. ReLU after each stage. Frames past
    a row's length are zeroed after every conv so padding never leaks into valid frames.
    """

    def __init__(self, cfg: FastConformerConfig):
        super().__init__()
        self.stages = int(math.log2(cfg.subsampling_factor))
        k, ch = cfg.subsampling_kernel, cfg.subsampling_conv_channels
        self.kernel, pad = k, (k - 1) // 2
        layers: list[nn.Module] = [nn.Conv2d(1, ch, k, stride=2, padding=pad), nn.ReLU()]
        for _ in range(self.stages - 1):
            if cfg.subsampling == "dw_striding":
                layers += [nn.Conv2d(ch, ch, k, stride=2, padding=pad, groups=ch), nn.Conv2d(ch, ch, 1), nn.ReLU()]
            else:
                layers += [nn.Conv2d(ch, ch, k, stride=2, padding=pad), nn.ReLU()]
        self.conv = nn.Sequential(*layers)
        freq = conv_output_lengths(cfg.n_mels, self.stages, k)
        self.out = nn.Linear(ch * freq, cfg.d_model)

    def _first_conv(self, x: Tensor) -> Tensor:
        """[B, T, F] -> [B, ch, T/2, F/2] in channels-last memory: the one-channel stride-2 conv as
        patches times a [k*k, ch] matrix (oneDNN's direct conv measured 1.6x slower on 60 s of
        frames), landing in the layout the depthwise convs after it run 7x faster on."""
        conv, k = self.conv[0], self.kernel
        pad = (k - 1) // 2
        b, t, f = x.shape
        padded = F.pad(x, (pad, pad, pad, pad))
        t_out, f_out = conv_output_lengths(t, 1, k), conv_output_lengths(f, 1, k)
        s = padded.stride()
        patches = padded.as_strided((b, t_out, f_out, k, k), (s[0], 2 * s[1], 2 * s[2], s[1], s[2]))
        weight = conv.weight.reshape(conv.out_channels, k * k).T
        y = patches.reshape(-1, k * k) @ weight if conv.bias is None else torch.addmm(conv.bias, patches.reshape(-1, k * k), weight)
        return y.view(b, t_out, f_out, -1).permute(0, 3, 1, 2)

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """x [B, T, F], lengths [B] -> [B, T', C], lengths [B]."""
        padded = bool((lengths < x.shape[1]).any())  # unpadded rows stay unpadded at every stage
        current = lengths
        for i, layer in enumerate(self.conv):
            if isinstance(layer, nn.ReLU):
                x = F.relu_(x)
                continue
            x = self._first_conv(x) if i == 0 else layer(x)
            if layer.stride[0] != 1:
                current = conv_output_lengths(current, 1, self.kernel)
            if padded:
                keep = torch.arange(x.shape[2], device=x.device) < current[:, None]
                x = x * keep[:, None, :, None].to(x.dtype)
        b, c, t, f = x.shape
        return self.out(x.transpose(1, 2).reshape(b, t, c * f)), current


def relative_positions(length: int, channels: int, device, dtype) -> Tensor:
    """Transformer-XL sinusoids for offsets length-1 .. -(length-1): [2T-1, C], sin/cos interleaved."""
    offsets = torch.arange(length - 1, -length, -1, device=device, dtype=torch.float32)
    inv_freq = torch.exp(torch.arange(0, channels, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / channels))
    angles = offsets[:, None] * inv_freq[None, :]
    return torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(len(offsets), channels).to(dtype)


QUERY_BLOCK = 128  # queries per block of the position scores: a block's product fits the cache


class RelPositionMultiHeadAttention(nn.Module):
    """Self-attention with relative positions and untied content/position biases (Dai et al. 2019)."""

    def __init__(self, cfg: FastConformerConfig):
        super().__init__()
        c, self.h = cfg.d_model, cfg.n_heads
        self.d = c // self.h
        bias = cfg.linear_bias
        self.linear_q = nn.Linear(c, c, bias=bias)
        self.linear_k = nn.Linear(c, c, bias=bias)
        self.linear_v = nn.Linear(c, c, bias=bias)
        self.linear_out = nn.Linear(c, c, bias=bias)
        self.linear_pos = nn.Linear(c, c, bias=False)
        self.pos_bias_u = nn.Parameter(torch.zeros(self.h, self.d))
        self.pos_bias_v = nn.Parameter(torch.zeros(self.h, self.d))

    @staticmethod
    def position_scores(q_v: Tensor, p: Tensor) -> Tensor:
        """q_v [B, H, T, D] x p [H, D, 2T-1] (offsets T-1 .. -(T-1)) -> [B, H, T, T] per key position.

        The Transformer-XL shift without its pad and copy: query i reads offsets T-1-i .. 2T-2-i,
        so a strided view whose row stride is one element short of the product's. A block of n
        queries needs only T+n-1 of the 2T-1 offsets: taken block by block the product does
        about half the work, and each block's product stays in cache (a 512-wide, 60 s chunk:
        16 ms a layer against 37 ms in one product, the same values).
        """
        b, h, t, _ = q_v.shape
        out = q_v.new_empty(b, h, t, t)
        for i0 in range(0, t, QUERY_BLOCK):
            i1 = min(t, i0 + QUERY_BLOCK)
            part = q_v[:, :, i0:i1] @ p[:, :, t - i1 : 2 * t - 1 - i0]  # query i0+r starts at column i1-1-i0-r
            s = part.stride()
            out[:, :, i0:i1] = part.as_strided((b, h, i1 - i0, t), (s[0], s[1], s[2] - 1, s[3]), part.storage_offset() + i1 - 1 - i0)
        return out

    def forward(self, x: Tensor, pos: Tensor, mask: Tensor | None) -> Tensor:
        """x [B, T, C], pos [2T-1, C], mask [B, 1, T, T] additive (0 or -inf-like) -> [B, T, C]."""
        b, t, _ = x.shape
        q = self.linear_q(x).view(b, t, self.h, self.d)
        k = self.linear_k(x).view(b, t, self.h, self.d).transpose(1, 2)
        v = self.linear_v(x).view(b, t, self.h, self.d).transpose(1, 2)
        p = self.linear_pos(pos).view(-1, self.h, self.d).permute(1, 2, 0)  # [H, D, 2T-1]
        scale = self.d**-0.5
        q_u = (q + self.pos_bias_u).transpose(1, 2)
        q_v = ((q + self.pos_bias_v) * scale).transpose(1, 2)  # scaled before the product: T x D, not T x 2T
        bd = self.position_scores(q_v, p)  # position term, added to the content scores
        if mask is not None:
            bd += mask
        out = F.scaled_dot_product_attention(q_u, k, v, attn_mask=bd, scale=scale)
        return self.linear_out(out.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, cfg: FastConformerConfig):
        super().__init__()
        self.linear1 = nn.Linear(cfg.d_model, cfg.ff_hidden, bias=cfg.linear_bias)
        self.linear2 = nn.Linear(cfg.ff_hidden, cfg.d_model, bias=cfg.linear_bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(F.silu(self.linear1(x)))


class PointwiseConv1d(nn.Conv1d):
    """A kernel-1 ``Conv1d`` (NeMo's weight [out, in, 1]) applied as a linear layer on [..., T, in]:
    no transposes around it, and one GEMM. ``oasr.quant`` treats it as a linear layer."""

    quant_as_linear = True  # oasr.quant: quantized like nn.Linear, its weight stored [out, in]

    def __init__(self, in_channels: int, out_channels: int, bias: bool = True):
        super().__init__(in_channels, out_channels, 1, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        """x [..., in] -> [..., out]."""
        return F.linear(x, self.weight[..., 0], self.bias)


class ConvModule(nn.Module):
    """Pointwise conv + GLU, depthwise conv, BatchNorm or LayerNorm, swish, pointwise conv.

    Runs on [B, T, C] throughout: the depthwise conv reads it as it lies (``depthwise_over_time``),
    and the norm acts on the last dimension.
    """

    def __init__(self, cfg: FastConformerConfig):
        super().__init__()
        c, k, bias = cfg.d_model, cfg.conv_kernel_size, cfg.conv_bias
        self.pointwise_conv1 = PointwiseConv1d(c, 2 * c, bias=bias)
        self.depthwise_conv = nn.Conv1d(c, c, k, padding=(k - 1) // 2, groups=c, bias=bias)
        self.batch_norm = nn.BatchNorm1d(c) if cfg.conv_norm_type == "batch_norm" else nn.LayerNorm(c)
        self.pointwise_conv2 = PointwiseConv1d(c, c, bias=bias)

    def _depthwise(self, x: Tensor) -> Tensor:
        """[B, T, C] -> [B, T, C]."""
        return depthwise_over_time(self.depthwise_conv, x)

    def _norm(self, x: Tensor) -> Tensor:
        norm = self.batch_norm
        if isinstance(norm, nn.LayerNorm):
            return norm(x)
        if norm.training:
            return norm(x.transpose(1, 2)).transpose(1, 2)
        scale = norm.weight * torch.rsqrt(norm.running_var + norm.eps)  # inference: one affine map per channel
        return torch.addcmul(norm.bias - norm.running_mean * scale, x, scale)

    def forward(self, x: Tensor, pad: Tensor | None) -> Tensor:
        """x [B, T, C], pad [B, T] True at padded frames -> [B, T, C]."""
        x = F.glu(self.pointwise_conv1(x), dim=-1)
        if pad is not None:  # padded frames must not reach valid ones through the depthwise kernel
            x = x.masked_fill(pad[..., None], 0.0)
        return self.pointwise_conv2(F.silu(self._norm(self._depthwise(x))))


class ConformerLayer(nn.Module):
    """Macaron block: half-step FF, attention, conv, half-step FF, each pre-normed, then a norm."""

    def __init__(self, cfg: FastConformerConfig):
        super().__init__()
        c = cfg.d_model
        self.norm_feed_forward1 = nn.LayerNorm(c)
        self.feed_forward1 = FeedForward(cfg)
        self.norm_self_att = nn.LayerNorm(c)
        self.self_attn = RelPositionMultiHeadAttention(cfg)
        self.norm_conv = nn.LayerNorm(c)
        self.conv = ConvModule(cfg)
        self.norm_feed_forward2 = nn.LayerNorm(c)
        self.feed_forward2 = FeedForward(cfg)
        self.norm_out = nn.LayerNorm(c)

    def forward(self, x: Tensor, pos: Tensor, mask: Tensor | None, pad: Tensor | None) -> Tensor:
        x = torch.add(x, self.feed_forward1(self.norm_feed_forward1(x)), alpha=0.5)
        x = x + self.self_attn(self.norm_self_att(x), pos, mask)
        x = x + self.conv(self.norm_conv(x), pad)
        x = torch.add(x, self.feed_forward2(self.norm_feed_forward2(x)), alpha=0.5)
        return self.norm_out(x)


def attention_mask(lengths: Tensor, t: int, cfg: FastConformerConfig, dtype) -> tuple[Tensor | None, Tensor | None]:
    """Additive [B, 1, T, T] mask (padding and limited context) and the [B, T] padding flags.

    Both are None when nothing is masked, so full-context unpadded input takes the fast path.
    """
    frames = torch.arange(t, device=lengths.device)
    valid = frames[None, :] < lengths[:, None]  # [B, T]
    allowed = valid[:, None, :] & valid[:, :, None]  # [B, Tq, Tk]
    left, right = cfg.att_context_size
    limited = left >= 0 or right >= 0
    if limited:
        offset = frames[None, :] - frames[:, None]  # key - query
        if cfg.att_context_style == "chunked_limited":
            size = right + 1
            chunk = frames // size
            diff = chunk[:, None] - chunk[None, :]  # query chunk - key chunk
            band = (diff >= 0) & (diff <= (left // size if left >= 0 else t))
        else:
            band = torch.ones(t, t, dtype=torch.bool, device=lengths.device)
            if left >= 0:
                band &= offset >= -left
            if right >= 0:
                band &= offset <= right
        allowed = allowed & band
    if bool(valid.all()) and not limited:
        return None, None
    # A fully masked row (a padded query) would softmax to NaN: let it see itself instead.
    allowed = allowed | torch.eye(t, dtype=torch.bool, device=lengths.device)
    mask = torch.zeros(allowed.shape, dtype=dtype, device=lengths.device)
    mask = mask.masked_fill(~allowed, torch.finfo(dtype).min)
    return mask[:, None], ~valid


class ConformerEncoder(nn.Module):
    """features [B, F, T] (NeMo's layout), lengths [B] -> encoded [B, T', C], lengths [B]."""

    def __init__(self, cfg: FastConformerConfig):
        super().__init__()
        self.cfg = cfg
        self.pre_encode = ConvSubsampling(cfg)
        self.layers = nn.ModuleList(ConformerLayer(cfg) for _ in range(cfg.n_layers))
        self.xscale = math.sqrt(cfg.d_model) if cfg.xscaling else 1.0

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        x, lengths = self.pre_encode(features.transpose(1, 2), lengths)
        x = x * self.xscale
        t = x.shape[1]
        pos = relative_positions(t, self.cfg.d_model, x.device, x.dtype)
        mask, pad = attention_mask(lengths, t, self.cfg, x.dtype)
        for layer in self.layers:
            x = layer(x, pos, mask, pad)
        return x, lengths
