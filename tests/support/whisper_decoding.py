"""Test-only Whisper decoding: a plain greedy decoder with a KV cache (the reference the runtime's
beam-1 decoding is held to) and ``align_words`` (``align_segments``' words alone)."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from oasr.decoding.whisper.alignment import align_segments
from oasr.models.whisper import Whisper, WhisperKVCache
from oasr.results import Word


@torch.inference_mode()
def greedy_decode(
    model: Whisper,
    audio_features: Tensor,
    prompt: Sequence[int],
    *,
    eot: int,
    suppress: Sequence[int] = (),
    suppress_at_begin: Sequence[int] = (),
    max_new_tokens: int | None = None,
) -> list[int]:
    """Tokens after ``prompt`` up to (not including) end-of-text, for a batch of one.

    ``suppress`` ids are never emitted; ``suppress_at_begin`` only at the first step (Whisper
    suppresses a leading blank and an immediate end-of-text).
    """
    limit = model.config.n_text_ctx - len(prompt)
    max_new_tokens = limit if max_new_tokens is None else min(max_new_tokens, limit)
    cache = WhisperKVCache()
    device = audio_features.device
    tokens = torch.tensor([list(prompt)], device=device)
    suppress_ids = torch.tensor(sorted(set(suppress)), dtype=torch.long, device=device)
    begin_ids = torch.tensor(sorted(set(suppress_at_begin)), dtype=torch.long, device=device)
    out: list[int] = []
    for step in range(max_new_tokens):
        logits = model.logits(tokens, audio_features, cache)[0, -1]
        logits[suppress_ids] = -torch.inf
        if step == 0:
            logits[begin_ids] = -torch.inf
        token = int(logits.argmax())
        if token == eot:
            break
        out.append(token)
        tokens = torch.tensor([[token]], device=device)
    return out


def align_words(*args, **kwargs) -> list[list[Word]]:
    """The words of each segment of one window, in absolute seconds (``align_segments``' words)."""
    return align_segments(*args, **kwargs).words
