"""icefall's heads: the CTC projection, the stateless transducer decoder and the joiner (``model.py``).

The decoder has no recurrence: the embeddings of the last ``context_size`` labels, mixed by a
grouped conv (groups of 4 channels) and a ReLU. A context slot of -1 (before the start) embeds
as zeros. Shapes: N rows, K context, D decoder width, J joiner width, V labels with the blank.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import ZipformerConfig


class Decoder(nn.Module):
    def __init__(self, cfg: ZipformerConfig):
        super().__init__()
        self.context_size = cfg.context_size
        self.embedding = nn.Embedding(cfg.vocab_size, cfg.decoder_dim)
        if cfg.context_size > 1:
            self.conv = nn.Conv1d(cfg.decoder_dim, cfg.decoder_dim, cfg.context_size, groups=cfg.decoder_dim // 4, bias=False)

    def forward(self, context: Tensor) -> Tensor:
        """context [N, K] label ids (-1: none yet) -> [N, D]."""
        x = self.embedding(context.clamp(min=0)) * (context >= 0).unsqueeze(-1)
        if self.context_size == 1:
            return x[:, 0]
        # The grouped conv over one output position as a batched matmul per group: the same sums,
        # ten times faster than conv1d on the one-row calls of a search.
        n, k, d = x.shape
        w = self.conv.weight  # [D, 4, K]: out channel g*4+o reads in channels g*4+i
        groups = w.shape[0] // w.shape[1]
        per_group = w.view(groups, w.shape[1], w.shape[1], k).permute(0, 2, 3, 1).reshape(groups, -1, w.shape[1])
        x = x.transpose(1, 2).reshape(n, groups, -1).transpose(0, 1)  # [G, N, 4*K]
        return F.relu(torch.bmm(x, per_group).transpose(0, 1).reshape(n, d))


class Joiner(nn.Module):
    """logits = output_linear(tanh(encoder_proj(f) + decoder_proj(g)))."""

    def __init__(self, cfg: ZipformerConfig):
        super().__init__()
        self.encoder_proj = nn.Linear(cfg.output_dim, cfg.joiner_dim)
        self.decoder_proj = nn.Linear(cfg.decoder_dim, cfg.joiner_dim)
        self.output_linear = nn.Linear(cfg.joiner_dim, cfg.vocab_size)

    def forward(self, enc_proj: Tensor, dec_proj: Tensor) -> Tensor:
        return self.output_linear(torch.tanh(enc_proj + dec_proj))
