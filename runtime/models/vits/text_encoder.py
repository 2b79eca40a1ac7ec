"""VITS text encoder: phoneme embeddings through a Transformer with relative-position attention.

Shapes: T phoneme ids, H hidden channels, heads of K = H / n_heads channels. Activations are
[B, H, T] (channels first, as the 1x1 convolutions that project them). Attention adds, to the
usual scaled dot product, learned embeddings of the offset between two positions, for offsets
within +-window (shared by the heads): ``emb_rel_k`` [1, 2w+1, K] bias the scores and
``emb_rel_v`` [1, 2w+1, K] are mixed into the output by the same offsets' weights.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class ChannelNorm(nn.Module):
    """Layer norm over the channels of [B, C, T] (VITS stores it as gamma/beta)."""

    def __init__(self, channels: int, eps: float = 1e-5):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(channels))
        self.beta = nn.Parameter(torch.zeros(channels))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        x = F.layer_norm(x.transpose(1, -1), (x.shape[1],), self.gamma, self.beta, self.eps)
        return x.transpose(1, -1)


class RelativeAttention(nn.Module):
    """Self-attention [B, H, T] -> [B, H, T] with relative-position keys and values."""

    def __init__(self, channels: int, n_heads: int, window: int):
        super().__init__()
        self.n_heads, self.window = n_heads, window
        self.k_channels = channels // n_heads
        self.conv_q = nn.Conv1d(channels, channels, 1)
        self.conv_k = nn.Conv1d(channels, channels, 1)
        self.conv_v = nn.Conv1d(channels, channels, 1)
        self.conv_o = nn.Conv1d(channels, channels, 1)
        self.emb_rel_k = nn.Parameter(torch.empty(1, 2 * window + 1, self.k_channels))
        self.emb_rel_v = nn.Parameter(torch.empty(1, 2 * window + 1, self.k_channels))

    def _offsets(self, table: Tensor, length: int) -> Tensor:
        """[1, 2w+1, K] -> [1, 2T-1, K]: the embedding of every offset -(T-1)..T-1 (zero beyond +-w)."""
        pad = max(length - (self.window + 1), 0)
        start = max((self.window + 1) - length, 0)
        if pad:
            table = F.pad(table, (0, 0, pad, pad))
        return table[:, start : start + 2 * length - 1]

    @staticmethod
    def _relative_to_absolute(x: Tensor) -> Tensor:
        """[B, h, T, 2T-1] scores by offset -> [B, h, T, T] by key position (the skew trick)."""
        b, h, t, _ = x.shape
        x = F.pad(x, (0, 1)).reshape(b, h, 2 * t * t)
        x = F.pad(x, (0, t - 1)).reshape(b, h, t + 1, 2 * t - 1)
        return x[:, :, :t, t - 1 :]

    @staticmethod
    def _absolute_to_relative(x: Tensor) -> Tensor:
        """[B, h, T, T] weights by key position -> [B, h, T, 2T-1] by offset."""
        b, h, t, _ = x.shape
        x = F.pad(x, (0, t - 1)).reshape(b, h, t * (2 * t - 1))
        x = F.pad(x, (t, 0)).reshape(b, h, t, 2 * t)
        return x[:, :, :, 1:]

    def forward(self, x: Tensor) -> Tensor:
        b, c, t = x.shape
        h, k = self.n_heads, self.k_channels

        def heads(y: Tensor) -> Tensor:  # [B, H, T] -> [B, h, T, K]
            return y.reshape(b, h, k, t).transpose(2, 3)

        q = heads(self.conv_q(x)) / math.sqrt(k)
        key, value = heads(self.conv_k(x)), heads(self.conv_v(x))
        scores = q @ key.transpose(-2, -1)
        scores = scores + self._relative_to_absolute(q @ self._offsets(self.emb_rel_k, t).unsqueeze(0).transpose(-2, -1))
        weights = scores.softmax(dim=-1)
        out = weights @ value + self._absolute_to_relative(weights) @ self._offsets(self.emb_rel_v, t).unsqueeze(0)
        return self.conv_o(out.transpose(2, 3).reshape(b, c, t))


class FeedForward(nn.Module):
    """[B, H, T] -> conv (kernel k, same padding) -> ReLU -> conv -> [B, H, T]."""

    def __init__(self, channels: int, filter_channels: int, kernel_size: int):
        super().__init__()
        self.padding = ((kernel_size - 1) // 2, kernel_size // 2)
        self.conv_1 = nn.Conv1d(channels, filter_channels, kernel_size)
        self.conv_2 = nn.Conv1d(filter_channels, channels, kernel_size)

    def forward(self, x: Tensor) -> Tensor:
        x = torch.relu(self.conv_1(F.pad(x, self.padding)))
        return self.conv_2(F.pad(x, self.padding))


class Encoder(nn.Module):
    """Post-norm Transformer layers: x = norm1(x + attn(x)); x = norm2(x + ffn(x))."""

    def __init__(self, channels: int, filter_channels: int, n_heads: int, n_layers: int, kernel_size: int, window: int):
        super().__init__()
        self.attn_layers = nn.ModuleList(RelativeAttention(channels, n_heads, window) for _ in range(n_layers))
        self.norm_layers_1 = nn.ModuleList(ChannelNorm(channels) for _ in range(n_layers))
        self.ffn_layers = nn.ModuleList(FeedForward(channels, filter_channels, kernel_size) for _ in range(n_layers))
        self.norm_layers_2 = nn.ModuleList(ChannelNorm(channels) for _ in range(n_layers))

    def forward(self, x: Tensor) -> Tensor:
        for attn, norm1, ffn, norm2 in zip(self.attn_layers, self.norm_layers_1, self.ffn_layers, self.norm_layers_2):
            x = norm1(x + attn(x))
            x = norm2(x + ffn(x))
        return x


class TextEncoder(nn.Module):
    """ids [B, T] -> (hidden [B, H, T], prior mean [B, D, T], prior log-std [B, D, T])."""

    def __init__(self, n_vocab: int, hidden: int, out_channels: int, filter_channels: int, n_heads: int,
                 n_layers: int, kernel_size: int, window: int):
        super().__init__()
        self.hidden = hidden
        self.emb = nn.Embedding(n_vocab, hidden)
        self.encoder = Encoder(hidden, filter_channels, n_heads, n_layers, kernel_size, window)
        self.proj = nn.Conv1d(hidden, 2 * out_channels, 1)

    def forward(self, ids: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x = (self.emb(ids) * math.sqrt(self.hidden)).transpose(1, 2)
        x = self.encoder(x)
        mean, log_std = self.proj(x).chunk(2, dim=1)
        return x, mean, log_std
