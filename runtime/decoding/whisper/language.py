"""Spoken-language identification with a multilingual Whisper: one decoder step after SOT."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ...errors import CapabilityError
from ...models.whisper import Whisper, WhisperKVCache
from ...tokenizers.whisper import WhisperTokenizer


@dataclass(frozen=True)
class LanguageGuess:
    language: str  # the most probable code, e.g. "en"
    probability: float
    probabilities: dict[str, float]  # every language code of the vocabulary, summing to 1


@torch.inference_mode()
def detect_language(
    model: Whisper, tokenizer: WhisperTokenizer, audio_features: Tensor, cross_kv: dict | None = None
) -> LanguageGuess:
    """The language token Whisper predicts after ``<|startoftranscript|>`` for the first window
    of ``audio_features`` [B, Ta, C], as openai-whisper does: a softmax over the language tokens
    only. ``cross_kv``: the windows' cross-attention keys and values (``Whisper.cross_kv``), when
    the decoding that follows will use them too."""
    if not tokenizer.multilingual or not tokenizer.languages:
        raise CapabilityError("this Whisper model is English-only; it cannot identify languages (pass a language)")
    tokens = torch.tensor([[tokenizer.sot]], device=audio_features.device)
    window_kv = {i: (k[:1], v[:1]) for i, (k, v) in cross_kv.items()} if cross_kv else {}
    logits = model.logits(tokens, audio_features[:1], WhisperKVCache.holding({}, window_kv))[0, -1].float()
    first = tokenizer.sot + 1
    probs = logits[first : first + len(tokenizer.languages)].softmax(dim=-1).tolist()
    best = max(range(len(probs)), key=probs.__getitem__)
    return LanguageGuess(
        language=tokenizer.languages[best],
        probability=probs[best],
        probabilities=dict(zip(tokenizer.languages, probs)),
    )
