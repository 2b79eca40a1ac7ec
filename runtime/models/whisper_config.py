"""Whisper's config, its specs and the tensors a bundle of it holds, without torch.

``oasr convert`` of a Whisper source runs on numpy alone (``oasr.conversion.run``): it checks
the tensors against ``WhisperLayout`` rather than a meta-built ``Whisper`` module, whose names
and shapes this layout mirrors (a test keeps the two equal).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from .config import BaseModelConfig

CAPABILITIES = frozenset({"transcribe", "translate", "language_id", "timestamps", "word_timestamps"})
COMPUTED_BUFFERS = ("encoder.positional_embedding",)


@dataclass(frozen=True)
class WhisperConfig(BaseModelConfig):
    n_mels: int
    n_audio_ctx: int  # encoder positions after the stride-2 conv: 1500 for 30 s
    n_audio_state: int
    n_audio_head: int
    n_audio_layer: int
    n_vocab: int
    n_text_ctx: int  # decoder positions: 448
    n_text_state: int
    n_text_head: int
    n_text_layer: int


def _block(prefix: str, c: int, cross: bool) -> dict[str, tuple[int, ...]]:
    attns = ("attn", "cross_attn") if cross else ("attn",)
    shapes: dict[str, tuple[int, ...]] = {}
    for attn in attns:
        for proj in ("query", "key", "value", "out"):
            shapes[f"{prefix}.{attn}.{proj}.weight"] = (c, c)
            if proj != "key":  # Whisper's key projection has no bias
                shapes[f"{prefix}.{attn}.{proj}.bias"] = (c,)
        shapes.update({f"{prefix}.{attn}_ln.weight": (c,), f"{prefix}.{attn}_ln.bias": (c,)})
    shapes.update({
        f"{prefix}.mlp.0.weight": (4 * c, c), f"{prefix}.mlp.0.bias": (4 * c,),
        f"{prefix}.mlp.2.weight": (c, 4 * c), f"{prefix}.mlp.2.bias": (c,),
        f"{prefix}.mlp_ln.weight": (c,), f"{prefix}.mlp_ln.bias": (c,),
    })
    return shapes


class WhisperLayout:
    """The stored tensors of ``Whisper(config)`` (names, shapes; float32 as built), its computed
    buffer and capabilities: what conversion checks a source against."""

    model_name: ClassVar[str] = "Whisper"
    computed_buffers: ClassVar[tuple[str, ...]] = COMPUTED_BUFFERS
    capabilities: ClassVar[frozenset[str]] = CAPABILITIES

    def __init__(self, config: WhisperConfig):
        self.config = config

    def expected_tensors(self) -> dict[str, tuple[tuple[int, ...], str]]:
        c = self.config
        a, t = c.n_audio_state, c.n_text_state
        shapes = {
            "encoder.conv1.weight": (a, c.n_mels, 3), "encoder.conv1.bias": (a,),
            "encoder.conv2.weight": (a, a, 3), "encoder.conv2.bias": (a,),
        }
        for i in range(c.n_audio_layer):
            shapes.update(_block(f"encoder.blocks.{i}", a, cross=False))
        shapes.update({"encoder.ln_post.weight": (a,), "encoder.ln_post.bias": (a,)})
        shapes.update({"decoder.token_embedding.weight": (c.n_vocab, t), "decoder.positional_embedding": (c.n_text_ctx, t)})
        for i in range(c.n_text_layer):
            shapes.update(_block(f"decoder.blocks.{i}", t, cross=True))
        shapes.update({"decoder.ln.weight": (t,), "decoder.ln.bias": (t,)})
        return {name: (shape, "float32") for name, shape in shapes.items()}

    def computed_buffer_values(self):
        """The encoder's sinusoids in numpy float32, as ``oasr.models.whisper.sinusoids`` builds them."""
        import numpy as np

        length, channels = self.config.n_audio_ctx, self.config.n_audio_state
        increment = math.log(10000.0) / (channels // 2 - 1)
        inv_timescales = np.exp(-increment * np.arange(channels // 2, dtype=np.float32)).astype(np.float32)
        scaled_time = np.arange(length, dtype=np.float32)[:, None] * inv_timescales[None, :]
        return {"encoder.positional_embedding": np.concatenate([np.sin(scaled_time), np.cos(scaled_time)], axis=1)}


def whisper_specs(
    config: WhisperConfig,
    tokenizer_files: dict,
    *,
    suppress_ids: list[int] | None = None,
    suppress_ids_begin: list[int] | None = None,
    alignment_heads: list[list[int]] | None = None,
):
    """TokenizerSpec, FeatureSpec and DecodingDefaults any Whisper source shares.

    Ids come from the vocabulary when tokenizer assets exist; options the source does not
    state are left out, and decoders fall back to openai-whisper's rules.
    """
    from ..specs import DecodingDefaults, FeatureSpec, TokenizerSpec

    multilingual = config.n_vocab >= 51865
    features = FeatureSpec(kind="whisper_logmel", sample_rate=16000, n_mels=config.n_mels, n_fft=400, hop_length=160)
    options: dict = {}
    if suppress_ids is not None:
        options["suppress_ids"] = [int(i) for i in suppress_ids]
    if suppress_ids_begin is not None:
        options["suppress_ids_begin"] = [int(i) for i in suppress_ids_begin]
    if alignment_heads:
        options["alignment_heads"] = [[int(layer), int(head)] for layer, head in alignment_heads]
    if not tokenizer_files:
        tokenizer = TokenizerSpec(kind="none")
        return tokenizer, features, DecodingDefaults(family="whisper_seq2seq", options=options)
    tokenizer = TokenizerSpec(kind="whisper", files=tuple(sorted(tokenizer_files)), options={"multilingual": multilingual})
    from ..tokenizers.whisper import WhisperTokenizer

    tok = WhisperTokenizer.from_files(tokenizer_files, tokenizer)
    decoding = DecodingDefaults(family="whisper_seq2seq", bos_id=tok.sot, eos_id=tok.eot, options=options)
    return tokenizer, features, decoding
