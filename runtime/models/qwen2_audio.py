"""Qwen2-Audio (Chu et al. 2024): a Whisper-like audio encoder, a linear projector and a Qwen2 decoder.

Tensor names are transformers' ``Qwen2AudioForConditionalGeneration`` ones without the leading
``model.``: ``audio_tower.*``, ``multi_modal_projector.*``, ``language_model.*``, ``lm_head``. The
audio features replace the ``<|AUDIO|>`` placeholders of the prompt (one per feature), as
transformers' ``masked_scatter`` does, then the decoder runs causally over the whole sequence.
Shapes: B batch, T time, C channels, H heads, G key/value heads, D head size, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import BaseModelConfig, OasrModel


@dataclass(frozen=True)
class Qwen2AudioConfig(BaseModelConfig):
    n_mels: int  # 128
    audio_ctx: int  # encoder positions after the stride-2 conv: 1500 for 30 s
    audio_state: int
    audio_heads: int
    audio_layers: int
    audio_ffn: int
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    rope_theta: float
    rms_norm_eps: float
    max_positions: int
    audio_token_id: int
    tie_word_embeddings: bool = False


class LayerNorm(nn.LayerNorm):
    """Normalises in fp32 whatever the model dtype, returns the input dtype."""

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x.float(), self.normalized_shape, self.weight.float(), self.bias.float(), self.eps).type(x.dtype)


class RMSNorm(nn.Module):
    """Qwen2's: the mean square in fp32, the weight applied after the cast back (transformers' order)."""

    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


# --- the audio encoder ---------------------------------------------------------------------------


class EncoderAttention(nn.Module):
    def __init__(self, n_state: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.q_proj = nn.Linear(n_state, n_state)
        self.k_proj = nn.Linear(n_state, n_state, bias=False)
        self.v_proj = nn.Linear(n_state, n_state)
        self.out_proj = nn.Linear(n_state, n_state)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        """x [B, T, C]; mask [B, 1, 1, T] (True: a key to attend) or None."""
        b, t, c = x.shape
        q, k, v = (p(x).view(b, t, self.n_head, -1).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out_proj(y.transpose(1, 2).reshape(b, t, c))


class EncoderLayer(nn.Module):
    def __init__(self, n_state: int, n_head: int, n_ffn: int):
        super().__init__()
        self.self_attn = EncoderAttention(n_state, n_head)
        self.self_attn_layer_norm = LayerNorm(n_state)
        self.fc1 = nn.Linear(n_state, n_ffn)
        self.fc2 = nn.Linear(n_ffn, n_state)
        self.final_layer_norm = LayerNorm(n_state)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        x = x + self.self_attn(self.self_attn_layer_norm(x), mask)
        return x + self.fc2(F.gelu(self.fc1(self.final_layer_norm(x))))


class AudioEncoder(nn.Module):
    """Whisper's encoder, then average pooling by 2 and the final norm: 30 s -> 750 features."""

    def __init__(self, c: Qwen2AudioConfig):
        super().__init__()
        self.conv1 = nn.Conv1d(c.n_mels, c.audio_state, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(c.audio_state, c.audio_state, kernel_size=3, stride=2, padding=1)
        self.embed_positions = nn.Embedding(c.audio_ctx, c.audio_state)
        self.layers = nn.ModuleList([EncoderLayer(c.audio_state, c.audio_heads, c.audio_ffn) for _ in range(c.audio_layers)])
        self.layer_norm = LayerNorm(c.audio_state)

    def forward(self, mel: Tensor, frames: Tensor) -> Tensor:
        """mel [B, n_mels, 2 * audio_ctx] (a full 30 s window), frames [B] (mel frames of audio in
        it) -> features [B, audio_ctx // 2, C]; attention skips the padded positions, as
        transformers' mask does (the features past ``feature_lengths(frames)`` are discarded)."""
        if mel.shape[-1] != 2 * self.embed_positions.num_embeddings:
            raise ValueError(f"mel has {mel.shape[-1]} frames; this encoder takes exactly {2 * self.embed_positions.num_embeddings}")
        x = F.gelu(self.conv1(mel))
        x = F.gelu(self.conv2(x)).permute(0, 2, 1)
        x = x + self.embed_positions.weight.to(x.dtype)
        kept = (frames.to(x.device) - 1) // 2 + 1
        mask = (torch.arange(x.shape[1], device=x.device)[None, :] < kept[:, None])[:, None, None, :]
        for layer in self.layers:
            x = layer(x, mask)
        x = F.avg_pool1d(x.permute(0, 2, 1), 2, 2).permute(0, 2, 1)
        return self.layer_norm(x)


def feature_lengths(frames: Tensor) -> Tensor:
    """Mel frames -> audio features (the number of ``<|AUDIO|>`` placeholders), transformers' rule."""
    return ((frames - 1) // 2 + 1 - 2) // 2 + 1


# --- the Qwen2 decoder ---------------------------------------------------------------------------


class KVCache:
    """Keys and values per decoder layer, [B, G, capacity, D] preallocated, ``offset`` filled; a
    write past the capacity doubles it. ``reorder`` keeps the rows of the beams that survive."""

    def __init__(self):
        self.offset = 0
        self.layers: list[tuple[Tensor, Tensor]] = []

    def write(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        end = self.offset + k.shape[2]
        if layer == len(self.layers):
            shape = (*k.shape[:2], max(2 * end, 64), k.shape[3])
            self.layers.append((k.new_empty(shape), v.new_empty(shape)))
        bk, bv = self.layers[layer]
        if end > bk.shape[2]:
            grown = [t.new_empty((*t.shape[:2], 2 * end, t.shape[3])) for t in (bk, bv)]
            for new, old in zip(grown, (bk, bv)):
                new[:, :, : self.offset] = old[:, :, : self.offset]
            bk, bv = grown
            self.layers[layer] = (bk, bv)
        bk[:, :, self.offset : end] = k
        bv[:, :, self.offset : end] = v
        return bk[:, :, :end], bv[:, :, :end]

    def reorder(self, index: Tensor) -> None:
        self.layers = [(k.index_select(0, index), v.index_select(0, index)) for k, v in self.layers]


def rotary(positions: Tensor, head_dim: int, theta: float) -> tuple[Tensor, Tensor]:
    """cos, sin [T, D] fp32 of the positions (Qwen2's default rope: halves concatenated)."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=positions.device).float() / head_dim))
    freqs = positions.float()[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    turned = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + turned * sin


class DecoderAttention(nn.Module):
    """Grouped-query attention: H query heads share G key/value heads (H / G each)."""

    def __init__(self, c: Qwen2AudioConfig):
        super().__init__()
        self.n_head, self.n_kv = c.num_heads, c.num_kv_heads
        self.head_dim = c.hidden_size // c.num_heads
        self.q_proj = nn.Linear(c.hidden_size, c.num_heads * self.head_dim)
        self.k_proj = nn.Linear(c.hidden_size, c.num_kv_heads * self.head_dim)
        self.v_proj = nn.Linear(c.hidden_size, c.num_kv_heads * self.head_dim)
        self.o_proj = nn.Linear(c.num_heads * self.head_dim, c.hidden_size, bias=False)

    def forward(self, x: Tensor, rope: tuple[Tensor, Tensor], cache: KVCache | None, layer: int) -> Tensor:
        b, t, _ = x.shape
        cos, sin = (r.to(x.dtype) for r in rope)
        q = _rotate(self.q_proj(x).view(b, t, self.n_head, -1).transpose(1, 2), cos, sin)
        k = _rotate(self.k_proj(x).view(b, t, self.n_kv, -1).transpose(1, 2), cos, sin)
        v = self.v_proj(x).view(b, t, self.n_kv, -1).transpose(1, 2)
        past = 0
        if cache is not None:
            past = cache.offset
            k, v = cache.write(layer, k, v)
        mask = None
        if t > 1:  # query i (position past + i) sees keys up to past + i
            mask = torch.arange(k.shape[2], device=x.device)[None, :] <= torch.arange(t, device=x.device)[:, None] + past
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=self.n_kv != self.n_head)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, -1))


class DecoderLayer(nn.Module):
    def __init__(self, c: Qwen2AudioConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = DecoderAttention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = SwiGLU(c.hidden_size, c.intermediate_size)

    def forward(self, x: Tensor, rope, cache: KVCache | None, layer: int) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), rope, cache, layer)
        return x + self.mlp(self.post_attention_layernorm(x))


class SwiGLU(nn.Module):
    def __init__(self, size: int, hidden: int):
        super().__init__()
        self.gate_proj = nn.Linear(size, hidden, bias=False)
        self.up_proj = nn.Linear(size, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, size, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LanguageModel(nn.Module):
    def __init__(self, c: Qwen2AudioConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(c) for _ in range(c.num_layers)])
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class Projector(nn.Module):
    def __init__(self, c: Qwen2AudioConfig):
        super().__init__()
        self.linear = nn.Linear(c.audio_state, c.hidden_size)


class Qwen2Audio(OasrModel):
    config_class: ClassVar = Qwen2AudioConfig
    capabilities: ClassVar = frozenset({"transcribe", "translate", "language_id", "prompt"})
    display_name: ClassVar = "Qwen2-Audio"
    # Quantized: the decoder's linear layers, its token table (int8 rows) and the output
    # projection; the audio encoder and the projector stay float (`--keep` keeps more, `oasr
    # quantize --keep ''` cannot quantize them: they are this family's rule). See verify.py.
    quant_refusal: ClassVar = None
    quant_keep: ClassVar = ("audio_tower.*", "multi_modal_projector.*")

    def __init__(self, config: Qwen2AudioConfig):
        super().__init__(config)
        self.audio_tower = AudioEncoder(config)
        self.multi_modal_projector = Projector(config)
        self.language_model = LanguageModel(config)
        self.lm_head = None if config.tie_word_embeddings else nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def embed_audio(self, mel: Tensor, frames: Tensor) -> list[Tensor]:
        """mel [B, n_mels, 3000], frames [B] -> per clip its projected features [n_i, hidden]."""
        features = self.multi_modal_projector.linear(self.audio_tower(mel, frames))
        return [f[:n] for f, n in zip(features, feature_lengths(frames).tolist())]

    def embed_prompt(self, ids: Tensor, audio: Tensor) -> Tensor:
        """ids [T] with ``len(audio)`` ``<|AUDIO|>`` placeholders, audio [n, hidden] -> [1, T, hidden]."""
        x = self.language_model.embed_tokens(ids)
        slots = ids == self.config.audio_token_id
        if int(slots.sum()) != audio.shape[0]:
            raise ValueError(f"the prompt has {int(slots.sum())} audio placeholders for {audio.shape[0]} audio features")
        x = x.clone()
        x[slots] = audio.to(x.dtype)
        return x[None]

    def embed_tokens(self, ids: Tensor) -> Tensor:
        return self.language_model.embed_tokens(ids)

    def logits(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        """Input embeddings [B, T, hidden] (the new positions when ``cache`` holds the past) ->
        logits [B, T, V] fp32; the cache advances by T."""
        lm = self.language_model
        past = cache.offset if cache is not None else 0
        rope = rotary(torch.arange(past, past + x.shape[1], device=x.device), self.config.hidden_size // self.config.num_heads, self.config.rope_theta)
        for i, layer in enumerate(lm.layers):
            x = layer(x, rope, cache, i)
        if cache is not None:
            cache.offset = past + x.shape[1]
        h = lm.norm(x)
        if self.lm_head is not None:
            return self.lm_head(h).float()
        table = lm.embed_tokens  # tied: the token table transposed (a quantized one has attend)
        return (table.attend(h) if hasattr(table, "attend") else h @ table.weight.to(h.dtype).T).float()
