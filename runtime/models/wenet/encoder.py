"""WeNet's encoders: global CMVN, convolutional subsampling, Conformer or Transformer blocks.

Module and parameter names are WeNet's (``embed.conv.0``, ``encoders.{i}.self_attn.linear_pos``,
``encoders.{i}.conv_module.depthwise_conv``, ``after_norm``), so its state dicts load one to one.
Shapes: B batch, T frames, F mel bands, C width, H heads, D head size.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..fastconformer.encoder import PointwiseConv1d
from ..time_conv import depthwise_over_time
from ..transformer_decoder import ACTIVATIONS, MultiHeadedAttention, PositionwiseFeedForward, sinusoids
from .config import WenetConfig


class GlobalCMVN(nn.Module):
    """(x - mean) * istd per mel band, as WeNet's ``GlobalCMVN`` (from ``global_cmvn``)."""

    def __init__(self, n_mels: int):
        super().__init__()
        self.register_buffer("mean", torch.zeros(n_mels))
        self.register_buffer("istd", torch.ones(n_mels))

    def forward(self, x: Tensor) -> Tensor:
        return (x - self.mean) * self.istd


def subsampled_lengths(lengths, input_layer: str):
    """Valid frames after the subsampling, as WeNet slices its masks (``[2::2]`` per 2x stage)."""
    if input_layer == "linear":
        return lengths
    lengths = (lengths - 1) // 2
    if input_layer == "conv2d6":
        return (lengths - 2) // 3
    for _ in range(1 if input_layer == "conv2d" else 2):
        lengths = (lengths - 1) // 2
    return lengths


class Subsampling(nn.Module):
    """``Conv2dSubsampling4/6/8`` (unpadded 3x3 stride-2 convs, a 5x5 stride-3 one for 6x, ReLU,
    then a linear layer) or ``LinearNoSubsampling`` (linear, layer norm): [B, T, F] -> [B, T', C]."""

    def __init__(self, cfg: WenetConfig):
        super().__init__()
        c, f, kind = cfg.d_model, cfg.n_mels, cfg.input_layer
        self.kind = kind
        if kind == "linear":
            self.out = nn.Sequential(nn.Linear(f, c), nn.LayerNorm(c, eps=1e-5))
            return
        shapes = {"conv2d": [(3, 2), (3, 2)], "conv2d6": [(3, 2), (5, 3)], "conv2d8": [(3, 2), (3, 2), (3, 2)]}[kind]
        layers: list[nn.Module] = []
        for i, (k, s) in enumerate(shapes):
            layers += [nn.Conv2d(1 if i == 0 else c, c, k, s), nn.ReLU()]
            f = (f - k) // s + 1
        self.conv = nn.Sequential(*layers)
        linear = nn.Linear(c * f, c)
        if kind == "conv2d":
            self.out = nn.Sequential(linear)
        else:
            self.linear = linear

    def forward(self, x: Tensor) -> Tensor:
        if self.kind == "linear":
            return self.out(x)
        x = self.conv(x.unsqueeze(1))
        b, c, t, f = x.shape
        x = x.transpose(1, 2).reshape(b, t, c * f)
        return self.out(x) if self.kind == "conv2d" else self.linear(x)


class RelPositionMultiHeadedAttention(MultiHeadedAttention):
    """WeNet's relative attention: scores (q + u) k^T + (q + v) p^T over sqrt(D), p the projected
    sinusoids of positions 0..T-1 (WeNet drops Transformer-XL's relative shift). The position
    term rides into the fused kernel as an additive mask, as WeNet's own SDPA path does."""

    def __init__(self, d_model: int, n_heads: int, bias: tuple[bool, bool, bool]):
        super().__init__(d_model, n_heads, bias)
        self.linear_pos = nn.Linear(d_model, d_model, bias=False)
        self.pos_bias_u = nn.Parameter(torch.zeros(self.h, self.d))
        self.pos_bias_v = nn.Parameter(torch.zeros(self.h, self.d))

    def forward(self, x: Tensor, pos: Tensor, mask: Tensor | None) -> Tensor:
        """x [B, T, C], pos [T, C], mask additive [B, 1, T|1, T] or None."""
        b, t, _ = x.shape
        q = self.linear_q(x).view(b, t, self.h, self.d)
        k, v = self.heads(x, self.linear_k), self.heads(x, self.linear_v)
        p = self.linear_pos(pos).view(t, self.h, self.d).permute(1, 2, 0)  # [H, D, T]
        bias = ((q + self.pos_bias_v).transpose(1, 2) @ p) / math.sqrt(self.d)  # [B, H, T, T]
        if mask is not None:
            bias = bias + mask
        return self.attend((q + self.pos_bias_u).transpose(1, 2), k, v, bias)


class ConvolutionModule(nn.Module):
    """Pointwise conv to 2C, GLU, depthwise conv (centred, or left-only when causal), batch or
    layer norm, activation, pointwise conv; padded frames zeroed going in and coming out.
    Causal: kernel - 1 zero frames go in front of the input, before the pointwise conv."""

    def __init__(self, cfg: WenetConfig):
        super().__init__()
        c, k = cfg.d_model, cfg.cnn_kernel
        self.lorder = k - 1 if cfg.causal else 0
        self.pointwise_conv1 = PointwiseConv1d(c, 2 * c, bias=cfg.conv_bias)  # run (and quantized) as linear layers
        self.depthwise_conv = nn.Conv1d(c, c, k, padding=0 if cfg.causal else (k - 1) // 2, groups=c, bias=cfg.conv_bias)
        self.layer_norm = cfg.cnn_norm == "layer_norm"
        self.norm = nn.LayerNorm(c, eps=cfg.conv_norm_eps) if self.layer_norm else nn.BatchNorm1d(c, eps=cfg.conv_norm_eps)
        self.pointwise_conv2 = PointwiseConv1d(c, c, bias=cfg.conv_bias)
        self.activation = ACTIVATIONS[cfg.activation]

    def forward(self, x: Tensor, pad: Tensor | None) -> Tensor:
        """x [B, T, C], pad [B, T] True at padded frames -> [B, T, C]."""
        if pad is not None:
            x = x.masked_fill(pad[..., None], 0.0)
        if self.lorder:  # WeNet pads before the pointwise conv: the left context is GLU(bias), not zeros
            x = F.pad(x, (0, 0, self.lorder, 0))
        x = depthwise_over_time(self.depthwise_conv, F.glu(self.pointwise_conv1(x), dim=-1))
        x = self.norm(x) if self.layer_norm else self.norm(x.transpose(1, 2)).transpose(1, 2)
        x = self.pointwise_conv2(self.activation(x))
        return x if pad is None else x.masked_fill(pad[..., None], 0.0)


class EncoderLayer(nn.Module):
    """A Conformer block (macaron half-step feed-forwards, attention, convolution, final norm) or,
    with no macaron and no convolution, a Transformer block (``norm1`` / ``norm2`` then)."""

    def __init__(self, cfg: WenetConfig):
        super().__init__()
        c = cfg.d_model
        self.conformer = cfg.encoder == "conformer"
        self.pre = cfg.normalize_before
        eps = cfg.norm_eps
        if cfg.attention == "rel_selfattn":
            self.self_attn = RelPositionMultiHeadedAttention(c, cfg.n_heads, cfg.qkv_bias)
        else:
            self.self_attn = MultiHeadedAttention(c, cfg.n_heads, cfg.qkv_bias)
        self.feed_forward = PositionwiseFeedForward(c, cfg.ff_hidden, cfg.activation)
        if not self.conformer:
            self.norm1, self.norm2 = nn.LayerNorm(c, eps=eps), nn.LayerNorm(c, eps=eps)
            return
        self.norm_ff, self.norm_mha = nn.LayerNorm(c, eps=eps), nn.LayerNorm(c, eps=eps)
        self.ff_scale = 0.5 if cfg.macaron else 1.0
        if cfg.macaron:
            self.feed_forward_macaron = PositionwiseFeedForward(c, cfg.ff_hidden, cfg.activation)
            self.norm_ff_macaron = nn.LayerNorm(c, eps=eps)
        self.has_conv = cfg.use_cnn_module
        if cfg.use_cnn_module:
            self.conv_module = ConvolutionModule(cfg)
            self.norm_conv, self.norm_final = nn.LayerNorm(c, eps=eps), nn.LayerNorm(c, eps=eps)

    def _block(self, x: Tensor, norm: nn.LayerNorm, fn, scale: float = 1.0) -> Tensor:
        if self.pre:
            return x + scale * fn(norm(x))
        return norm(x + scale * fn(x))

    def _attend(self, x: Tensor, pos: Tensor, mask: Tensor | None) -> Tensor:
        if isinstance(self.self_attn, RelPositionMultiHeadedAttention):
            return self.self_attn(x, pos, mask)
        return self.self_attn(x, x, mask)

    def forward(self, x: Tensor, pos: Tensor, mask: Tensor | None, pad: Tensor | None) -> Tensor:
        if not self.conformer:
            x = self._block(x, self.norm1, lambda y: self._attend(y, pos, mask))
            return self._block(x, self.norm2, self.feed_forward)
        if hasattr(self, "feed_forward_macaron"):
            x = self._block(x, self.norm_ff_macaron, self.feed_forward_macaron, self.ff_scale)
        x = self._block(x, self.norm_mha, lambda y: self._attend(y, pos, mask))
        if self.has_conv:
            x = self._block(x, self.norm_conv, lambda y: self.conv_module(y, pad))
        x = self._block(x, self.norm_ff, self.feed_forward, self.ff_scale)
        return self.norm_final(x) if self.has_conv else x


def attention_mask(lengths: Tensor, t: int, cfg: WenetConfig, dtype) -> tuple[Tensor | None, Tensor | None]:
    """Additive [B, 1, T|1, T] mask (padded keys; a static chunk's future) and [B, T] padding flags;
    both None when nothing is masked."""
    frames = torch.arange(t, device=lengths.device)
    valid = frames[None, :] < lengths[:, None]  # [B, T]
    chunked = cfg.static_chunk_size > 0 and not cfg.use_dynamic_chunk
    if bool(valid.all()) and not chunked:
        return None, None
    allowed = valid[:, None, :]  # [B, 1, Tk]
    if chunked:  # WeNet's subsequent_chunk_mask with every chunk to the left
        size = cfg.static_chunk_size
        allowed = allowed & (frames[None, :] < ((frames[:, None] // size + 1) * size))[None]  # [B, Tq, Tk]
    mask = torch.zeros(allowed.shape, dtype=dtype, device=lengths.device).masked_fill(~allowed, torch.finfo(dtype).min)
    return mask[:, None], ~valid


class WenetEncoder(nn.Module):
    """features [B, F, T], lengths [B] -> encoded [B, T', C], lengths [B]."""

    def __init__(self, cfg: WenetConfig):
        super().__init__()
        self.cfg = cfg
        if cfg.cmvn:
            self.global_cmvn = GlobalCMVN(cfg.n_mels)
        self.embed = Subsampling(cfg)
        self.encoders = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_layers))
        if cfg.normalize_before and cfg.final_norm:
            self.after_norm = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
        self.xscale = 1.0 if cfg.pos_enc == "no_pos" else math.sqrt(cfg.d_model)  # WeNet's NoPositionalEncoding does not scale

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        x = features.transpose(1, 2)
        if self.cfg.cmvn:
            x = self.global_cmvn(x)
        x = self.embed(x) * self.xscale
        lengths = subsampled_lengths(lengths, self.cfg.input_layer).clamp(min=0)
        t = x.shape[1]
        pos = sinusoids(t, self.cfg.d_model, x.device, x.dtype)
        if self.cfg.pos_enc == "abs_pos":
            x = x + pos
        mask, pad = attention_mask(lengths, t, self.cfg, x.dtype)
        for layer in self.encoders:
            x = layer(x, pos, mask, pad)
        if hasattr(self, "after_norm"):
            x = self.after_norm(x)
        return x, lengths
