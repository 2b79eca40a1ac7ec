"""An attention (AED) decoder: token embedding + sinusoids, pre-norm Transformer layers with
causal self-attention and cross-attention over the encoder, a final norm and an output layer.

This is the decoder of ESPnet's and WeNet's hybrid CTC/attention models (WeNet's
``TransformerDecoder``; U2++'s ``BiTransformerDecoder`` is two of them, the second reading the
tokens right to left). Parameter names are WeNet's (``embed.0``, ``decoders.{i}.self_attn.linear_q``,
``src_attn``, ``feed_forward.w_1``, ``norm1..3``, ``after_norm``, ``output_layer``), so a WeNet
state dict loads one to one; another framework's decoder of the same arithmetic maps its names
onto these in its converter's tensor table. icefall's ``AttentionDecoderModel`` is one: its
attentions run at their own width (``attention_dim``), the cross-attention reads an encoder of
another width (``memory_dim``), its feed-forward is Swish and it has no final norm.

The decoding family ``aed`` (``oasr.decoding.aed``) only calls ``log_probs``
(teacher-forced scores of whole hypotheses) and ``step`` (the next token's scores
of growing prefixes); a model exposes its decoder through ``OasrModel`` methods named in
``oasr.decoding.aed.search``. Shapes: B batch, L tokens, T encoder frames, C width, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu, "silu": F.silu, "tanh": torch.tanh}


@dataclass(frozen=True)
class AttentionDecoderConfig:
    vocab_size: int
    d_model: int  # the decoder's width (WeNet: the encoder's output_size, which it shares)
    n_heads: int = 4
    ff_hidden: int = 2048
    n_layers: int = 6
    r_layers: int = 0  # a right-to-left decoder of this many layers (U2++'s bitransformer), 0: none
    normalize_before: bool = True
    activation: str = "relu"
    norm_eps: float = 1e-5
    attention_dim: int = 0  # the attentions' inner width (icefall's attention_dim); 0: d_model
    memory_dim: int = 0  # the encoder width the cross-attention reads (icefall's memory_dim); 0: d_model
    final_norm: bool = True  # after_norm on the last layer's output (pre-norm only); icefall has none


def sinusoids(length: int, channels: int, device=None, dtype=torch.float32) -> Tensor:
    """[length, channels]: sin at even channels, cos at odd ones, of positions 0..length-1."""
    position = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, channels, 2, device=device, dtype=torch.float32) * -(math.log(10000.0) / channels))
    pe = torch.zeros(length, channels, device=device)
    pe[:, 0::2] = torch.sin(position * div)
    pe[:, 1::2] = torch.cos(position * div)
    return pe.to(dtype)


class MultiHeadedAttention(nn.Module):
    """Scaled dot-product attention over H heads (the projections WeNet and ESPnet name)."""

    def __init__(self, d_model: int, n_heads: int, bias: tuple[bool, bool, bool] = (True, True, True), attention_dim: int = 0, memory_dim: int = 0):
        super().__init__()
        inner, source = attention_dim or d_model, memory_dim or d_model
        self.h, self.d = n_heads, inner // n_heads
        self.linear_q = nn.Linear(d_model, inner, bias=bias[0])
        self.linear_k = nn.Linear(source, inner, bias=bias[1])
        self.linear_v = nn.Linear(source, inner, bias=bias[2])
        self.linear_out = nn.Linear(inner, d_model)

    def heads(self, x: Tensor, linear: nn.Linear) -> Tensor:
        """[B, T, C] -> [B, H, T, D]."""
        b, t, _ = x.shape
        return linear(x).view(b, t, self.h, self.d).transpose(1, 2)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool = False) -> Tensor:
        """Heads in, [B, T, C] out; ``mask`` additive, broadcastable to [B, H, Tq, Tk]."""
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and mask is None)
        b, _, t, _ = out.shape
        return self.linear_out(out.transpose(1, 2).reshape(b, t, self.h * self.d))

    def forward(self, query: Tensor, memory: Tensor, mask: Tensor | None = None, causal: bool = False) -> Tensor:
        return self.attend(self.heads(query, self.linear_q), self.heads(memory, self.linear_k), self.heads(memory, self.linear_v), mask, causal)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model: int, hidden: int, activation: str):
        super().__init__()
        self.w_1 = nn.Linear(d_model, hidden)
        self.w_2 = nn.Linear(hidden, d_model)
        self.activation = ACTIVATIONS[activation]

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(self.activation(self.w_1(x)))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: AttentionDecoderConfig):
        super().__init__()
        c = cfg.d_model
        self.self_attn = MultiHeadedAttention(c, cfg.n_heads, attention_dim=cfg.attention_dim)
        self.src_attn = MultiHeadedAttention(c, cfg.n_heads, attention_dim=cfg.attention_dim, memory_dim=cfg.memory_dim)
        self.feed_forward = PositionwiseFeedForward(c, cfg.ff_hidden, cfg.activation)
        self.norm1 = nn.LayerNorm(c, eps=cfg.norm_eps)
        self.norm2 = nn.LayerNorm(c, eps=cfg.norm_eps)
        self.norm3 = nn.LayerNorm(c, eps=cfg.norm_eps)
        self.pre = cfg.normalize_before

    def _block(self, x: Tensor, norm: nn.LayerNorm, fn) -> Tensor:
        return x + fn(norm(x)) if self.pre else norm(x + fn(x))

    def forward(self, x: Tensor, memory: Tensor, memory_mask: Tensor | None, self_mask: Tensor | None = None) -> Tensor:
        """x [B, L, C] (causal self-attention; ``self_mask`` additive instead when given)."""
        x = self._block(x, self.norm1, lambda y: self.self_attn(y, y, self_mask, causal=True))
        x = self._block(x, self.norm2, lambda y: self.src_attn(y, memory, memory_mask))
        return self._block(x, self.norm3, self.feed_forward)


class TransformerDecoder(nn.Module):
    """tokens [B, L] (sos first), encoder memory [B, T, C] -> logits [B, L, V] (``decoder.*`` in WeNet)."""

    has_reverse = False

    def __init__(self, cfg: AttentionDecoderConfig, n_layers: int | None = None):
        super().__init__()
        self.cfg = cfg
        c = cfg.d_model
        self.embed = nn.Sequential(nn.Embedding(cfg.vocab_size, c))
        self.decoders = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_layers if n_layers is None else n_layers))
        if cfg.final_norm:
            self.after_norm = nn.LayerNorm(c, eps=cfg.norm_eps)
        self.output_layer = nn.Linear(c, cfg.vocab_size)
        self.xscale = math.sqrt(c)

    def forward(self, tokens: Tensor, memory: Tensor, memory_mask: Tensor | None = None) -> Tensor:
        """``memory_mask``: additive [B, 1, 1, T] (None: every frame valid)."""
        x = self.embed[0](tokens) * self.xscale + sinusoids(tokens.shape[1], self.cfg.d_model, tokens.device, memory.dtype)
        for layer in self.decoders:
            x = layer(x, memory, memory_mask)
        if self.cfg.normalize_before and self.cfg.final_norm:
            x = self.after_norm(x)
        return self.output_layer(x)

    def log_probs(self, tokens: Tensor, memory: Tensor, memory_mask: Tensor | None = None, reverse: bool = False) -> Tensor:
        """Teacher-forced log-probabilities [B, L, V] of the token after each prefix of ``tokens``."""
        if reverse:
            raise ValueError("this decoder reads left to right only")
        return self(tokens, memory, memory_mask).float().log_softmax(-1)

    def step(self, prefixes: Tensor, memory: Tensor, memory_mask: Tensor | None = None) -> Tensor:
        """prefixes [B, i] -> log-probabilities [B, V] of the next token. The whole prefix is run
        again each step: attention beam search is WeNet's slow mode, rescoring the fast one."""
        return self(prefixes, memory, memory_mask)[:, -1].float().log_softmax(-1)


class BiTransformerDecoder(nn.Module):
    """U2++'s pair: ``left_decoder`` (left to right) and ``right_decoder`` (``r_layers`` layers,
    reading the hypothesis reversed); ``step`` is the left one's."""

    has_reverse = True

    def __init__(self, cfg: AttentionDecoderConfig):
        super().__init__()
        self.cfg = cfg
        self.left_decoder = TransformerDecoder(cfg)
        self.right_decoder = TransformerDecoder(cfg, cfg.r_layers)

    def log_probs(self, tokens: Tensor, memory: Tensor, memory_mask: Tensor | None = None, reverse: bool = False) -> Tensor:
        decoder = self.right_decoder if reverse else self.left_decoder
        return decoder(tokens, memory, memory_mask).float().log_softmax(-1)

    def step(self, prefixes: Tensor, memory: Tensor, memory_mask: Tensor | None = None) -> Tensor:
        return self.left_decoder.step(prefixes, memory, memory_mask)


def attention_decoder(cfg: AttentionDecoderConfig) -> TransformerDecoder | BiTransformerDecoder:
    return BiTransformerDecoder(cfg) if cfg.r_layers > 0 else TransformerDecoder(cfg)
