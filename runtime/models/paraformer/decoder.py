"""The Paraformer SAN-M decoder: all tokens at once from the predictor's acoustic embeddings.

Each of the first ``att_layers`` layers: pre-norm feed-forward (with a norm inside, no output
bias), an FSMN memory block as its self-attention (residual around both), then pre-norm
cross-attention over the encoder output. The remaining layers have no cross-attention; a last
layer is a feed-forward alone (no residual), then a norm and the output projection.
Shapes: B batch, N tokens, T encoder frames, C channels, V vocabulary.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import ParaformerConfig
from .encoder import Memory, layer_norm


class DecoderFeedForward(nn.Module):
    def __init__(self, size: int, hidden: int):
        super().__init__()
        self.w_1 = nn.Linear(size, hidden)
        self.norm = layer_norm(hidden)
        self.w_2 = nn.Linear(hidden, size, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.norm(torch.relu(self.w_1(x))))


class CrossAttention(nn.Module):
    def __init__(self, size: int, heads: int):
        super().__init__()
        self.heads = heads
        self.linear_q = nn.Linear(size, size)
        self.linear_k_v = nn.Linear(size, size * 2)
        self.linear_out = nn.Linear(size, size)

    def forward(self, x: Tensor, memory: Tensor, memory_keys: Tensor | None) -> Tensor:
        """x [B, N, C], memory [B, T, C], memory_keys [B, 1, 1, T] bool or None -> [B, N, C]."""
        b, n, _ = x.shape
        q = self.linear_q(x).reshape(b, n, self.heads, -1).transpose(1, 2)
        k, v = (z.reshape(b, memory.shape[1], self.heads, -1).transpose(1, 2) for z in self.linear_k_v(memory).chunk(2, dim=-1))
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=memory_keys)
        return self.linear_out(att.transpose(1, 2).reshape(b, n, -1))


class DecoderLayer(nn.Module):
    def __init__(self, config: ParaformerConfig, memory: bool, cross: bool, shift: int = 0):
        super().__init__()
        size = config.d_model
        self.feed_forward = DecoderFeedForward(size, config.decoder_ff)
        self.norm1 = layer_norm(size)
        self.self_attn = Memory(size, config.decoder_kernel, shift) if memory else None
        if memory:
            self.norm2 = layer_norm(size)
        self.src_attn = CrossAttention(size, config.decoder_heads) if cross else None
        if cross:
            self.norm3 = layer_norm(size)

    def forward(self, x: Tensor, mask: Tensor, memory: Tensor, memory_keys: Tensor | None) -> Tensor:
        h = self.feed_forward(self.norm1(x))
        if self.self_attn is not None:
            x = x + self.self_attn(self.norm2(h), mask)
        else:
            x = h
        if self.src_attn is not None:
            x = x + self.src_attn(self.norm3(x), memory, memory_keys)
        return x


class ParaformerDecoder(nn.Module):
    def __init__(self, config: ParaformerConfig):
        super().__init__()
        n_cross, n_rest = config.decoder_att_layers, config.decoder_layers - config.decoder_att_layers
        self.decoders = nn.ModuleList([DecoderLayer(config, True, True, config.decoder_shift) for _ in range(n_cross)])
        self.decoders2 = nn.ModuleList([DecoderLayer(config, True, False) for _ in range(n_rest)])
        self.decoders3 = nn.ModuleList([DecoderLayer(config, False, False)])
        self.after_norm = layer_norm(config.d_model)
        self.output_layer = nn.Linear(config.d_model, config.vocab_size)

    def forward(self, encoded: Tensor, enc_lengths: Tensor, embeds: Tensor, token_lengths: Tensor) -> Tensor:
        """encoded [B, T, C], enc_lengths [B], embeds [B, N, C], token_lengths [B] -> logits [B, N, V]."""
        n, t = embeds.shape[1], encoded.shape[1]
        mask = (torch.arange(n, device=embeds.device)[None, :] < token_lengths[:, None]).to(embeds.dtype)[:, :, None]
        keys = (torch.arange(t, device=encoded.device)[None, :] < enc_lengths[:, None])[:, None, None, :]
        x = embeds
        for layer in (*self.decoders, *self.decoders2, *self.decoders3):
            x = layer(x, mask, encoded, keys)
        return self.output_layer(self.after_norm(x))
