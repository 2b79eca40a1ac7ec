"""HTDemucs' cross-domain transformer: the bottleneck of both branches, attending within and across.

The frequency branch's [B, C, Fr, T1] becomes T1*Fr tokens (time-major) with a 2-D sinusoidal
position code; the time branch's [B, C, T2] becomes T2 tokens with a 1-D one. Layers alternate:
even indices self-attend within each branch, odd ones attend from each branch to the other (both
reading the other's input to the layer). Every layer is pre-norm with LayerScale on both residuals
and a GroupNorm(1) over (tokens, channels) at its end. Names follow demucs (``layers.N.self_attn``,
``cross_attn``, ``linear1/2``, ``norm1..3``, ``norm_out``, ``gamma_1/2``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .layers import LayerScale


def sin_embedding(length: int, dim: int, max_period: float, device=None) -> Tensor:
    """[length, dim]: cos then sin of position / max_period^(i / (dim/2 - 1))."""
    pos = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    half = dim // 2
    phase = pos / (max_period ** (torch.arange(half, device=device) / (half - 1)))
    return torch.cat([torch.cos(phase), torch.sin(phase)], dim=-1)


def sin_embedding_2d(dim: int, height: int, width: int, max_period: float, device=None) -> Tensor:
    """[dim, height, width]: the first half of the channels codes the width (time) position, the
    second half the height (frequency), sin on even channels and cos on odd ones."""
    pe = torch.zeros(dim, height, width, device=device)
    half = dim // 2
    div = torch.exp(torch.arange(0.0, half, 2, device=device) * -(math.log(max_period) / half))
    pos_w = torch.arange(0.0, width, device=device)[:, None] * div  # [width, half/2]
    pos_h = torch.arange(0.0, height, device=device)[:, None] * div
    pe[0:half:2] = torch.sin(pos_w).t()[:, None, :].expand(-1, height, -1)
    pe[1:half:2] = torch.cos(pos_w).t()[:, None, :].expand(-1, height, -1)
    pe[half::2] = torch.sin(pos_h).t()[:, :, None].expand(-1, -1, width)
    pe[half + 1 :: 2] = torch.cos(pos_h).t()[:, :, None].expand(-1, -1, width)
    return pe


class TokenGroupNorm(nn.GroupNorm):
    """GroupNorm over [B, tokens, C] (demucs' MyGroupNorm): normalised with channels on dim 1."""

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


class Attention(nn.Module):
    """Multi-head attention with torch's MultiheadAttention parameter layout (a packed in-projection)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * dim, dim))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * dim))
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, q: Tensor, kv: Tensor) -> Tensor:
        """q [B, Tq, C], kv [B, Tk, C] -> [B, Tq, C]."""
        B, Tq, C = q.shape
        w, b = self.in_proj_weight, self.in_proj_bias
        if q is kv:
            q, k, v = F.linear(q, w, b).chunk(3, dim=-1)
        else:
            q = F.linear(q, w[:C], b[:C])
            k, v = F.linear(kv, w[C:], b[C:]).chunk(2, dim=-1)
        split = lambda t: t.unflatten(-1, (self.heads, -1)).transpose(1, 2)  # noqa: E731 [B, H, T, C/H]
        out = F.scaled_dot_product_attention(split(q), split(k), split(v))
        return self.out_proj(out.transpose(1, 2).reshape(B, Tq, C))


class TransformerLayer(nn.Module):
    """One pre-norm layer; ``cross``: queries from this branch, keys and values from the other."""

    def __init__(self, dim: int, heads: int, hidden: int, *, cross: bool, gelu: bool, group_norm: int,
                 norm_out: int, layer_scale: bool, norm_first: bool):
        super().__init__()
        self.cross, self.norm_first = cross, norm_first
        attention = Attention(dim, heads)
        if cross:
            self.cross_attn = attention
        else:
            self.self_attn = attention
        self.linear1 = nn.Linear(dim, hidden)
        self.linear2 = nn.Linear(hidden, dim)
        norm = (lambda: TokenGroupNorm(int(group_norm), dim)) if group_norm else (lambda: nn.LayerNorm(dim))
        self.norm1, self.norm2 = norm(), norm()
        if cross:
            self.norm3 = norm()
        self.norm_out = TokenGroupNorm(int(norm_out), dim) if norm_first and norm_out else None
        self.gamma_1 = LayerScale(dim, channel_last=True) if layer_scale else nn.Identity()
        self.gamma_2 = LayerScale(dim, channel_last=True) if layer_scale else nn.Identity()
        self.activation = F.gelu if gelu else F.relu

    def _ff(self, x: Tensor) -> Tensor:
        return self.linear2(self.activation(self.linear1(x)))

    def forward(self, x: Tensor, other: Tensor | None = None) -> Tensor:
        attend = self.cross_attn if self.cross else self.self_attn
        last_norm = self.norm3 if self.cross else self.norm2
        if self.norm_first:
            q = self.norm1(x)
            kv = self.norm2(other) if self.cross else q
            x = x + self.gamma_1(attend(q, kv))
            x = x + self.gamma_2(self._ff(last_norm(x)))
            return self.norm_out(x) if self.norm_out is not None else x
        x = self.norm1(x + self.gamma_1(attend(x, other if self.cross else x)))
        return self.norm2(x + self.gamma_2(self._ff(x)))


class CrossTransformerEncoder(nn.Module):
    """(x [B, C, Fr, T1], xt [B, C, T2]) -> the same shapes (x channels last)."""

    def __init__(self, dim: int, *, heads: int, layers: int, hidden_scale: float, cross_first: bool, norm_in: bool,
                 norm_in_group: int, group_norm: int, norm_first: bool, norm_out: int, max_period: float,
                 layer_scale: bool, gelu: bool, weight_pos_embed: float):
        super().__init__()
        self.classic_parity = 1 if cross_first else 0
        self.max_period, self.weight_pos_embed = max_period, weight_pos_embed
        if norm_in:
            self.norm_in, self.norm_in_t = nn.LayerNorm(dim), nn.LayerNorm(dim)
        elif norm_in_group:
            self.norm_in, self.norm_in_t = TokenGroupNorm(int(norm_in_group), dim), TokenGroupNorm(int(norm_in_group), dim)
        else:
            self.norm_in, self.norm_in_t = nn.Identity(), nn.Identity()
        kw = dict(dim=dim, heads=heads, hidden=int(dim * hidden_scale), gelu=gelu, group_norm=group_norm,
                  norm_out=norm_out, layer_scale=layer_scale, norm_first=norm_first)
        self.layers = nn.ModuleList()
        self.layers_t = nn.ModuleList()
        for i in range(layers):
            cross = i % 2 != self.classic_parity
            self.layers.append(TransformerLayer(cross=cross, **kw))
            self.layers_t.append(TransformerLayer(cross=cross, **kw))

    def forward(self, x: Tensor, xt: Tensor) -> tuple[Tensor, Tensor]:
        B, C, Fr, T1 = x.shape
        pos_2d = sin_embedding_2d(C, Fr, T1, self.max_period, x.device)  # [C, Fr, T1]
        pos_2d = pos_2d.permute(2, 1, 0).reshape(1, T1 * Fr, C)
        x = x.permute(0, 3, 2, 1).reshape(B, T1 * Fr, C)  # tokens time-major, then frequency
        x = self.norm_in(x) + self.weight_pos_embed * pos_2d.to(x.dtype)
        T2 = xt.shape[-1]
        xt = xt.transpose(1, 2)
        xt = self.norm_in_t(xt) + self.weight_pos_embed * sin_embedding(T2, C, self.max_period, x.device).to(x.dtype)
        for layer, layer_t in zip(self.layers, self.layers_t):
            if layer.cross:
                x, xt = layer(x, xt), layer_t(xt, x)
            else:
                x, xt = layer(x), layer_t(xt)
        x = x.view(B, T1, Fr, C).transpose(1, 2).contiguous().permute(0, 3, 1, 2)  # channels last, as it came
        return x, xt.transpose(1, 2)
