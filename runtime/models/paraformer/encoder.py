"""The SAN-M encoder (Gao et al. 2020): self-attention beside an FSMN memory block.

Each layer: pre-norm, one projection to queries, keys and values; the values also pass a
depthwise convolution over time (the memory block, its taps ``kernel`` wide, ``shift`` of them
moved to the past) whose output, plus the values, is added to the attention's. The first layer
maps the LFR features (``input_size``) to ``d_model`` and has no residual around its attention.
Inputs are scaled by sqrt(d_model) and given FunASR's sinusoidal positions (from 1) first.
Shapes: B batch, T frames, C channels, H heads.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..time_conv import depthwise_over_time
from .config import ParaformerConfig

LAYER_NORM_EPS = 1e-12  # FunASR's LayerNorm


def layer_norm(size: int) -> nn.LayerNorm:
    return nn.LayerNorm(size, eps=LAYER_NORM_EPS)


def sinusoidal_positions(frames: int, depth: int, device, dtype) -> Tensor:
    """[1, T, C]: FunASR's SinusoidalPositionEncoder (positions from 1, sines then cosines,
    timescales spaced over depth / 2 - 1 steps)."""
    # FunASR's float32 operations in its order: the angles reach ~T radians, so a rounding
    # difference in the timescales would show at 1e-4 on long inputs.
    positions = torch.arange(1, frames + 1, device=device).float()
    increment = torch.log(torch.tensor([10000.0], device=device)) / (depth / 2 - 1)
    inv = torch.exp(torch.arange(depth / 2, device=device).float() * -increment)
    scaled = positions[:, None] * inv[None, :]
    return torch.cat([torch.sin(scaled), torch.cos(scaled)], dim=-1)[None].to(dtype)


class FeedForward(nn.Module):
    def __init__(self, size: int, hidden: int):
        super().__init__()
        self.w_1 = nn.Linear(size, hidden)
        self.w_2 = nn.Linear(hidden, size)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(torch.relu(self.w_1(x)))


class Memory(nn.Module):
    """The FSMN block: a bias-free depthwise conv over time, added to its input; padded frames
    are zeroed before and after (``mask`` [B, T, 1]). Alone, it is the decoder's self-attention."""

    def __init__(self, size: int, kernel: int, shift: int):
        super().__init__()
        self.fsmn_block = nn.Conv1d(size, size, kernel, groups=size, bias=False)
        left = (kernel - 1) // 2 + max(shift, 0)
        self.pad = (left, kernel - 1 - left)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        return self.remember(x, mask)

    def remember(self, x: Tensor, mask: Tensor | None) -> Tensor:
        if mask is not None:
            x = x * mask
        y = depthwise_over_time(self.fsmn_block, x, *self.pad) + x
        return y * mask if mask is not None else y


class SanmAttention(Memory):
    def __init__(self, in_size: int, size: int, heads: int, kernel: int, shift: int):
        super().__init__(size, kernel, shift)
        self.heads = heads
        self.linear_q_k_v = nn.Linear(in_size, size * 3)
        self.linear_out = nn.Linear(size, size)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        """x [B, T, C_in], mask [B, T, 1] (1: a real frame) or None -> [B, T, C]."""
        b, t, _ = x.shape
        q, k, v = self.linear_q_k_v(x).chunk(3, dim=-1)
        memory = self.remember(v, mask)
        q, k, v = (z.reshape(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        keys = None if mask is None else mask[:, None, :, 0].bool()[:, :, None, :]  # [B, 1, 1, T]
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=keys)
        return self.linear_out(att.transpose(1, 2).reshape(b, t, -1)) + memory


class EncoderLayer(nn.Module):
    def __init__(self, in_size: int, config: ParaformerConfig):
        super().__init__()
        size = config.d_model
        self.residual = in_size == size
        self.self_attn = SanmAttention(in_size, size, config.encoder_heads, config.encoder_kernel, config.encoder_shift)
        self.feed_forward = FeedForward(size, config.encoder_ff)
        self.norm1 = layer_norm(in_size)
        self.norm2 = layer_norm(size)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        att = self.self_attn(self.norm1(x), mask)
        x = x + att if self.residual else att
        return x + self.feed_forward(self.norm2(x))


class SanmEncoder(nn.Module):
    def __init__(self, config: ParaformerConfig):
        super().__init__()
        self.d_model = config.d_model
        self.encoders0 = nn.ModuleList([EncoderLayer(config.input_size, config)])
        self.encoders = nn.ModuleList([EncoderLayer(config.d_model, config) for _ in range(config.encoder_layers - 1)])
        self.after_norm = layer_norm(config.d_model)

    def forward(self, features: Tensor, lengths: Tensor) -> Tensor:
        """features [B, T, input_size] (CMVN applied), lengths [B] -> [B, T, C] (padding zeroed
        only where FunASR zeroes it: the outputs past a length are not used)."""
        t = features.shape[1]
        mask = None
        if bool((lengths < t).any()):
            mask = (torch.arange(t, device=features.device)[None, :] < lengths[:, None]).to(features.dtype)[:, :, None]
        x = features * self.d_model**0.5
        x = x + sinusoidal_positions(t, x.shape[-1], x.device, x.dtype)
        for layer in (*self.encoders0, *self.encoders):
            x = layer(x, mask)
        return self.after_norm(x)
