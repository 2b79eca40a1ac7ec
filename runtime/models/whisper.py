"""Whisper (Radford et al. 2022) in torch: one implementation for every source format.

Tensor names follow openai-whisper's ``model_state_dict``, so its checkpoints map one to one and
every other converter translates into the same names. Shapes: B batch, T time, C channels,
H heads, D head size, V vocabulary.
"""

from __future__ import annotations

import math
from typing import ClassVar, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import onednn
from ..heap import between_layers
from ..quant.modules import WIDE_ROWS, QuantLinear
from .base import OasrModel
from .whisper_config import CAPABILITIES, COMPUTED_BUFFERS, WhisperConfig


def sinusoids(length: int, channels: int, max_timescale: float = 10000.0) -> Tensor:
    """The encoder's fixed positional embedding, [length, channels] fp32."""
    assert channels % 2 == 0
    increment = math.log(max_timescale) / (channels // 2 - 1)
    inv_timescales = torch.exp(-increment * torch.arange(channels // 2, dtype=torch.float32))
    scaled_time = torch.arange(length, dtype=torch.float32)[:, None] * inv_timescales[None, :]
    return torch.cat([torch.sin(scaled_time), torch.cos(scaled_time)], dim=1)


class Linear(nn.Linear):
    """For a few rows (a decoding step) computes (W x^T)^T: CPU BLAS then streams the weight once
    instead of packing it, about 1.6x faster when the weights come from memory, not cache.
    ``onednn``: the weight packed for oneDNN (``oasr.onednn.pack_linears``), used for fp32 inputs."""

    onednn: Tensor | None = None

    def forward(self, x: Tensor) -> Tensor:
        if self.onednn is not None and x.dtype == torch.float32:
            return onednn.linear(x, self.onednn, self.bias)
        rows = x.numel() // x.shape[-1]
        if rows > 8:
            return F.linear(x, self.weight, self.bias)
        flat = x.reshape(rows, x.shape[-1]).T
        y = self.weight @ flat if self.bias is None else torch.addmm(self.bias[:, None], self.weight, flat)
        return y.T.contiguous().view(*x.shape[:-1], -1)


class Embedding(nn.Embedding):
    """The token table, also the output projection (tied): ``attend`` is x W^T."""

    onednn: Tensor | None = None  # as Linear's

    def attend(self, x: Tensor) -> Tensor:
        """x [B, T, C] -> [B, T, V] in x's dtype."""
        if self.onednn is not None and x.dtype == torch.float32:
            return onednn.linear(x, self.onednn, None)
        weight = self.weight.to(x.dtype)
        if x.shape[0] * x.shape[1] <= 8:  # decoding steps: W x^T streams W once (2x faster on CPU BLAS)
            return (weight @ x.flatten(0, 1).T).T.reshape(*x.shape[:2], -1)
        return x @ weight.T


def project_consuming(linear: nn.Module, x: Tensor) -> Tensor:
    """``linear(x)`` for an ``x`` no one reads after: an integer layer scales it in place instead
    of a scaled copy (bit for bit the same product)."""
    return linear(x, consume=True) if isinstance(linear, QuantLinear) else linear(x)


class MLP(nn.Sequential):
    """Linear, GELU, Linear (openai's ``mlp.0``, ``mlp.2``), consuming its input (a LayerNorm's
    fresh output). The hidden activation, 4x the width (an encoder window's: 12 MB), is made
    once: GELU overwrites it and the second projection consumes it. Copies of it were holes in
    the heap that the next larger tensor did not fit."""

    def __init__(self, n_state: int, n_hidden: int):
        super().__init__(Linear(n_state, n_hidden), nn.GELU(), Linear(n_hidden, n_state))

    def forward(self, x: Tensor) -> Tensor:
        h = project_consuming(self[0], x)
        h = F.gelu(h) if h.requires_grad else torch.ops.aten.gelu_(h)
        return project_consuming(self[2], h)


class LayerNorm(nn.LayerNorm):
    """Normalises in fp32 whatever the model dtype, returns the input dtype."""

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(
            x.float(), self.normalized_shape, self.weight.float(), self.bias.float(), self.eps
        ).type(x.dtype)


class WhisperKVCache:
    """Keys and values per decoder block: self-attention written in place, cross-attention computed once.

    The self-attention keys and values of every block live in one preallocated buffer
    [blocks, 2, B, H, capacity, D] of which ``offset`` positions are filled: a step writes its keys
    at the offset (the past is never copied, as ``torch.cat`` would copy it every step), and
    ``reorder`` gathers the rows of the beams that were kept, every block at once, into a second
    buffer of the same shape, then swaps the two; ``copy_rows`` copies a few rows in place. Cross-attention keys are [W, H, Ta, D] per block,
    one row per window; the B self-attention rows are W groups of B / W rows (the beams or samples
    of one window follow each other). ``capacity``: positions allocated at the first write (the
    buffer grows, doubling, when a write goes past it).
    """

    def __init__(self, capacity: int = 0):
        self.capacity = capacity
        self.offset = 0  # positions filled (the next token's position)
        self.buffer: Tensor | None = None  # [blocks, 2, B, H, capacity, D]
        self.cross_kv: dict[int, tuple[Tensor, Tensor]] = {}
        self._spare: Tensor | None = None  # reorder's second buffer

    @classmethod
    def holding(cls, self_kv: dict, cross_kv: dict, capacity: int = 0, take: bool = False) -> "WhisperKVCache":
        """A cache starting from ``self_kv`` (filled keys, values [B, H, T, D] per block, copied:
        the originals are never written) and ``cross_kv`` (shared, read only; ``take``: the dict
        itself, whose blocks ``reorder`` then replaces, so the originals can go)."""
        cache = cls(capacity)
        cache.cross_kv = cross_kv if take else dict(cross_kv)
        if self_kv:
            k0 = self_kv[0][0]
            b, h, t, d = k0.shape
            cache.reserve(len(self_kv), (b, h, d), t, k0)
            for i, (k, v) in self_kv.items():
                cache.write(i, k, v, 0)
            cache.offset = k0.shape[2]
        return cache

    @property
    def self_kv(self) -> dict[int, tuple[Tensor, Tensor]]:
        """The filled keys and values of each block, [B, H, offset, D] views."""
        if self.buffer is None:
            return {}
        n = self.offset
        return {i: (layer[0, :, :, :n], layer[1, :, :, :n]) for i, layer in enumerate(self.buffer)}

    def reserve(self, blocks: int, rows: tuple[int, int, int], end: int, like: Tensor) -> None:
        """Room for positions up to ``end`` of ``rows`` (B, H, D), in ``like``'s dtype and device
        (the decoder calls this before its blocks write)."""
        b, h, d = rows
        old = self.buffer
        if old is not None and old.shape[4] >= end:
            if old.shape[2] != b:
                raise ValueError(f"a batch of {b} rows for a cache of {old.shape[2]} (reorder it first)")
            return
        size = max(self.capacity, end, 2 * old.shape[4] if old is not None else 0)
        new = like.new_empty(blocks, 2, b, h, size, d)
        if old is not None:
            new[..., : self.offset, :] = old[..., : self.offset, :]
        self.buffer, self._spare = new, None

    def write(self, layer: int, k: Tensor, v: Tensor, offset: int) -> tuple[Tensor, Tensor]:
        """Store ``k``, ``v`` [B, H, T, D] at positions offset.. of block ``layer``; returns the
        keys and values of positions 0 .. offset + T (views of the buffer)."""
        end = offset + k.shape[2]
        block = self.buffer[layer]
        block[0, :, :, offset:end] = k
        block[1, :, :, offset:end] = v
        return block[0, :, :, :end], block[1, :, :, :end]

    def copy_rows(self, dest: Tensor, source: Tensor) -> None:
        """Self-attention rows ``dest`` become copies of rows ``source`` (no row in both), in place:
        a beam step copies only the rows whose beam died, not every row as ``reorder`` does."""
        if self.buffer is not None:
            filled = self.buffer[..., : self.offset, :]
            filled.index_copy_(2, dest, filled.index_select(2, source))

    def reorder(self, index: Tensor, windows: Tensor | None = None) -> None:
        """Self-attention rows ``index`` [B'] (the beams kept, or one row spread to several), all
        blocks in one gather; ``windows``: the cross-attention rows (windows) that remain, when
        some are dropped."""
        old, n = self.buffer, self.offset
        if old is not None:
            spare = self._spare
            if spare is None or spare.shape[2] != index.shape[0]:
                shape = list(old.shape)
                shape[2] = index.shape[0]
                spare = old.new_empty(shape)
            torch.index_select(old[..., :n, :], 2, index, out=spare[..., :n, :])
            self.buffer = spare
            self._spare = old if old.shape[2] == index.shape[0] else None
        if windows is not None:  # block by block: a block's old rows go before the next is copied
            for i, (k, v) in self.cross_kv.items():
                self.cross_kv[i] = (k.index_select(0, windows), v.index_select(0, windows))


def attention_in_blocks(q: Tensor, k: Tensor, v: Tensor, rows: int) -> Tensor:
    """softmax(q k^T / sqrt(D)) v without a mask, as explicit products over ``rows`` query rows at
    a time (each block's scores stay in cache): where the CPU has bf16 dot products but no AMX
    tiles, SDPA's fused kernel runs bf16 no faster than fp32 while bf16 GEMMs run 4x faster."""
    q = (q * q.shape[-1] ** -0.5).contiguous()
    kt = k.transpose(-1, -2)  # a view: the GEMM reads it transposed, a copy would cost more
    out = torch.empty_like(q)
    for i in range(0, q.shape[2], rows):
        torch.matmul(torch.matmul(q[:, :, i : i + rows], kt).softmax(-1), v, out=out[:, :, i : i + rows])
    return out


class MultiHeadAttention(nn.Module):
    # SDPA in this dtype (None: the model's): keys and values are projected into it, queries cast
    # to it, the result cast back. Set by ``Whisper.attend_in``, as is ``attention_rows``: an
    # unmasked attention then runs as ``attention_in_blocks`` of that many query rows.
    attention_dtype: torch.dtype | None = None
    attention_rows: int | None = None

    def __init__(self, n_state: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.query = Linear(n_state, n_state)
        self.key = Linear(n_state, n_state, bias=False)
        self.value = Linear(n_state, n_state)
        self.out = Linear(n_state, n_state)

    def _heads(self, x: Tensor) -> Tensor:
        b, t, c = x.shape
        return x.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        k, v = self._heads(self.key(x)), self._heads(self.value(x))
        if self.attention_dtype is None:
            return k, v
        # contiguous [B, H, T, D]: read head by head at every decoding step
        return tuple(t.to(self.attention_dtype, memory_format=torch.contiguous_format) for t in (k, v))

    def forward(
        self, x: Tensor, kv: tuple[Tensor, Tensor], causal_offset: int | None, return_scores: bool = False
    ) -> Tensor | tuple[Tensor, Tensor]:
        """x [B, Tq, C] attends over kv ([B, H, Tk, D] each).

        ``causal_offset`` is the absolute position of x's first row for self-attention (None for
        cross-attention): query i sees keys up to causal_offset + i.
        ``return_scores`` computes the attention explicitly (not through SDPA) and also returns its
        scores before the softmax, q k^T / sqrt(D) in fp32 [B, H, Tq, Tk] (word alignment uses them).
        """
        q = self._heads(self.query(x))
        k, v = kv
        q = q.to(k.dtype)
        mask = None
        is_causal = False
        tq, tk = q.shape[2], k.shape[2]
        if causal_offset is not None and tq > 1:
            if causal_offset == 0 and tq == tk and not return_scores:
                is_causal = True
            else:
                rows = torch.arange(tq, device=x.device)[:, None] + causal_offset
                mask = torch.arange(tk, device=x.device)[None, :] <= rows
        if return_scores:
            scores = (q @ k.transpose(-1, -2)).float() * (q.shape[-1] ** -0.5)
            if mask is not None:
                scores = scores.masked_fill(~mask, -torch.inf)
            y = scores.softmax(dim=-1).to(v.dtype) @ v
            return project_consuming(self.out, y.transpose(1, 2).flatten(2).to(x.dtype)), scores
        if causal_offset is None and k.shape[0] < q.shape[0]:
            # Keys of W windows shared by groups of G = B / W rows (beams): the rows of a group
            # become query positions, one attention call over [W, H, G * Tq, D], no broadcast copies.
            b, h, _, d = q.shape
            w = k.shape[0]
            g = b // w
            q = q.view(w, g, h, tq, d).transpose(1, 2).reshape(w, h, g * tq, d)
            y = self._attend(q, k, v).view(w, h, g, tq, d).transpose(1, 2).reshape(b, h, tq, d)
            return project_consuming(self.out, y.transpose(1, 2).flatten(2).to(x.dtype))
        y = self._attend(q, k, v, mask, is_causal)
        return project_consuming(self.out, y.transpose(1, 2).flatten(2).to(x.dtype))

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        if self.attention_rows is not None and mask is None and not is_causal:
            return attention_in_blocks(q, k, v, self.attention_rows)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, n_state: int, n_head: int, cross_attention: bool = False):
        super().__init__()
        self.attn = MultiHeadAttention(n_state, n_head)
        self.attn_ln = LayerNorm(n_state)
        self.cross_attn = MultiHeadAttention(n_state, n_head) if cross_attention else None
        self.cross_attn_ln = LayerNorm(n_state) if cross_attention else None
        self.mlp = MLP(n_state, 4 * n_state)
        self.mlp_ln = LayerNorm(n_state)

    def forward(
        self,
        x: Tensor,
        cache: WhisperKVCache | None = None,
        layer: int = 0,
        causal_offset: int | None = None,
        cross_kv: tuple[Tensor, Tensor] | None = None,
        cross_scores: list[Tensor] | None = None,
    ) -> Tensor:
        """``cache``: the decoder's self-attention cache, block ``layer`` of it (None: the encoder,
        or a decoder call without one); ``cross_scores``: a list to append the cross-attention
        scores [B, H, Tq, Ta] to (None: SDPA)."""
        h = self.attn_ln(x)
        k, v = self.attn.project_kv(h)
        if cache is not None:  # the past and these positions, written in place
            k, v = cache.write(layer, k, v, causal_offset)
        # Residuals are added into the branch's output, a tensor of this block's own (an
        # encoder window's 3 MB is not allocated anew three times a block); the sums are the same.
        x = self.attn(h, (k, v), causal_offset).add_(x)
        if self.cross_attn is not None:
            if cross_scores is not None:
                y, scores = self.cross_attn(self.cross_attn_ln(x), cross_kv, None, return_scores=True)
                cross_scores.append(scores)
                x = y.add_(x)
            else:
                x = self.cross_attn(self.cross_attn_ln(x), cross_kv, None).add_(x)
        return self.mlp(self.mlp_ln(x)).add_(x)


class AudioEncoder(nn.Module):
    def __init__(self, n_mels: int, n_ctx: int, n_state: int, n_head: int, n_layer: int):
        super().__init__()
        self.conv1 = nn.Conv1d(n_mels, n_state, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(n_state, n_state, kernel_size=3, stride=2, padding=1)
        self.register_buffer("positional_embedding", torch.empty(n_ctx, n_state))
        self.blocks = nn.ModuleList([ResidualAttentionBlock(n_state, n_head) for _ in range(n_layer)])
        self.ln_post = LayerNorm(n_state)

    def forward(self, mel: Tensor) -> Tensor:
        """mel [B, n_mels, 2 * T] -> audio features [B, T, C], T at most n_audio_ctx."""
        x = F.gelu(self.conv1(mel))
        x = F.gelu(self.conv2(x)).permute(0, 2, 1)
        if x.shape[1] > self.positional_embedding.shape[0]:
            raise ValueError(f"mel has {mel.shape[-1]} frames; this encoder takes at most {2 * self.positional_embedding.shape[0]}")
        x = x + self.positional_embedding[: x.shape[1]].to(x.dtype)
        for block in self.blocks:
            x = block(x)
            between_layers()  # a recording of one window gives the heap's freed pages back (oasr.heap)
        return self.ln_post(x)


class TextDecoder(nn.Module):
    def __init__(self, n_vocab: int, n_ctx: int, n_state: int, n_head: int, n_layer: int):
        super().__init__()
        self.token_embedding = Embedding(n_vocab, n_state)
        self.positional_embedding = nn.Parameter(torch.empty(n_ctx, n_state))
        self.blocks = nn.ModuleList(
            [ResidualAttentionBlock(n_state, n_head, cross_attention=True) for _ in range(n_layer)]
        )
        self.ln = LayerNorm(n_state)

    def forward(
        self,
        tokens: Tensor,
        audio_features: Tensor,
        cache: WhisperKVCache | None = None,
        cross_attention_heads: Sequence[Sequence[int]] | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """tokens [B, Tq] (only the new ones when a cache is given), audio [B, Ta, C] -> logits [B, Tq, V] fp32.

        The output projection is the token embedding, transposed (tied, stored once).
        ``cross_attention_heads``: (layer, head) pairs; when given, returns (logits, scores) with the
        cross-attention scores before the softmax of those heads, in that order: [B, n_heads, Tq, Ta] fp32.
        """
        captured: dict[int, list[Tensor]] = {}
        if cross_attention_heads is not None:
            captured = {int(layer): [] for layer, _ in cross_attention_heads}
        offset = cache.offset if cache is not None else 0
        x = self.token_embedding(tokens) + self.positional_embedding[offset : offset + tokens.shape[-1]]
        x = x.to(audio_features.dtype)
        if cache is not None:
            heads = self.blocks[0].attn.n_head
            cache.reserve(len(self.blocks), (tokens.shape[0], heads, x.shape[-1] // heads), offset + tokens.shape[-1], x)
        for i, block in enumerate(self.blocks):
            if cache is not None:
                if i not in cache.cross_kv:
                    cache.cross_kv[i] = block.cross_attn.project_kv(audio_features)
                cross_kv = cache.cross_kv[i]
            else:
                cross_kv = block.cross_attn.project_kv(audio_features)
            x = block(x, cache, i, offset, cross_kv, captured.get(i))
        if cache is not None:
            cache.offset = offset + tokens.shape[-1]
        logits = self.token_embedding.attend(self.ln(x)).contiguous().float()
        if cross_attention_heads is None:
            return logits
        scores = [captured[int(layer)][0][:, int(head)] for layer, head in cross_attention_heads]
        return logits, torch.stack(scores, dim=1)


class Whisper(OasrModel):
    config_class: ClassVar = WhisperConfig
    computed_buffers: ClassVar = COMPUTED_BUFFERS
    capabilities: ClassVar = CAPABILITIES
    # Quantized: every attention and MLP projection, and the token table (int8 per token row,
    # also in int4 bundles: it is the tied output projection, 36% of base's weights, so a float
    # copy alone would exceed the size budget, and at int8 logits keep a cosine >= 0.999).
    # Convolutions, norms, biases and positional tables stay float. `--keep
    # decoder.token_embedding.weight` keeps the table float.
    quant_refusal: ClassVar = None
    # The encoder sees 1500 frames a window. The token table (the output projection) packs in
    # half fbgemm's time there (0.12 s against 0.25 s for base: start-up) and runs as fast at 5
    # rows, 1.7x faster at 40 (batched beams).
    quant_amx_rows: ClassVar = (("encoder.", WIDE_ROWS), ("decoder.token_embedding", 1))
    # dtype auto on a CPU runs the int8 variant: 1.3-3.9x faster, WER held, and the encoder's
    # self-attention and the cross-attention in bf16 where the CPU has it (benchmarks/precision.md).
    auto_int8_on_cpu: ClassVar = True
    bf16_attention: ClassVar = True

    def __init__(self, config: WhisperConfig):
        super().__init__(config)
        c = config
        self.encoder = AudioEncoder(c.n_mels, c.n_audio_ctx, c.n_audio_state, c.n_audio_head, c.n_audio_layer)
        self.decoder = TextDecoder(c.n_vocab, c.n_text_ctx, c.n_text_state, c.n_text_head, c.n_text_layer)

    def computed_buffer_values(self) -> dict[str, Tensor]:
        c = self.config
        return {"encoder.positional_embedding": sinusoids(c.n_audio_ctx, c.n_audio_state)}

    def attend_in(self, dtype: torch.dtype | None, rows: int | None = None) -> None:
        """Run the long attentions in ``dtype`` (None: the model's): the encoder's self-attention
        and the decoder's cross-attention over the audio, whose keys and values are then stored in
        it. The decoder's self-attention, over a few hundred tokens, stays in the model's dtype.
        ``rows``: those attentions as explicit products over this many query rows at a time
        (``attention_in_blocks``) instead of SDPA's fused kernel."""
        for block in self.encoder.blocks:
            block.attn.attention_dtype = dtype
            block.attn.attention_rows = rows
        for block in self.decoder.blocks:
            block.cross_attn.attention_dtype = dtype
            block.cross_attn.attention_rows = rows

    def embed_audio(self, mel: Tensor) -> Tensor:
        return self.encoder(mel)

    def cross_kv(self, audio_features: Tensor) -> dict[int, tuple[Tensor, Tensor]]:
        """Every decoder block's cross-attention keys and values of ``audio_features`` [W, Ta, C],
        as a ``WhisperKVCache`` holds them (one projection serves several decoder calls)."""
        return {i: block.cross_attn.project_kv(audio_features) for i, block in enumerate(self.decoder.blocks)}

    def logits(
        self,
        tokens: Tensor,
        audio_features: Tensor,
        cache: WhisperKVCache | None = None,
        cross_attention_heads: Sequence[Sequence[int]] | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Logits [B, Tq, V]; with ``cross_attention_heads`` also their scores [B, n_heads, Tq, Ta] (see TextDecoder)."""
        return self.decoder(tokens, audio_features, cache, cross_attention_heads)

    def forward(self, mel: Tensor, tokens: Tensor) -> Tensor:
        return self.decoder(tokens, self.encoder(mel))
