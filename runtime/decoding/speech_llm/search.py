"""Greedy and beam search over a speech LLM with a KV cache: the prompt's embeddings are run
once (the prefill), then one token per step.

The model gives ``logits(embeddings [B, T, C], cache) -> [B, T, V]`` and ``embed_tokens(ids)``;
``KVCache.reorder`` keeps the rows of the beams that survive. Greedy takes the best token until
a stop token or the length limit (transformers' ``generate`` with ``do_sample=False``, its
result token for token). Beam search keeps ``beam_size`` hypotheses, takes the best
``2 * beam_size`` continuations each step, sets finished ones aside scored by
``sum(logprob) / length ** length_penalty`` and stops when no live one can beat the worst kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Hypothesis:
    tokens: list[int]  # generated, the stop token left out
    logprob: float  # the sum over the generated tokens (the stop token's included)


def greedy(model, prompt: Tensor, cache, stops: set[int], max_new: int) -> Hypothesis:
    """prompt [1, T, C] -> the greedy answer."""
    logits = model.logits(prompt, cache)[:, -1]
    tokens: list[int] = []
    total = 0.0
    for _ in range(max_new):
        logprobs = logits.log_softmax(-1)
        token = int(logits.argmax(-1))
        total += float(logprobs[0, token])
        if token in stops:
            break
        tokens.append(token)
        logits = model.logits(model.embed_tokens(torch.tensor([[token]], device=prompt.device)), cache)[:, -1]
    return Hypothesis(tokens, total)


def beam(model, prompt: Tensor, cache, stops: set[int], max_new: int, beam_size: int, length_penalty: float = 1.0) -> Hypothesis:
    """prompt [1, T, C] -> the best of ``beam_size`` beams."""
    logprobs = model.logits(prompt, cache)[:, -1].log_softmax(-1)  # [1, V]
    cache.reorder(torch.zeros(beam_size, dtype=torch.long, device=prompt.device))
    scores = torch.full((beam_size,), -torch.inf, device=prompt.device)
    scores[0] = 0.0  # every beam starts as the one prompt: only the first may extend at step one
    logprobs = logprobs.expand(beam_size, -1)
    alive: list[list[int]] = [[] for _ in range(beam_size)]
    done: list[tuple[float, Hypothesis]] = []
    for step in range(1, max_new + 1):
        vocab = logprobs.shape[-1]
        total = (scores[:, None] + logprobs).flatten()
        best, index = total.topk(2 * beam_size)
        keep_rows, keep_tokens, keep_scores = [], [], []
        for score, flat in zip(best.tolist(), index.tolist()):
            row, token = divmod(flat, vocab)
            if score == -torch.inf:
                break
            if token in stops:
                if len(keep_rows) < beam_size:  # only a top beam_size continuation may finish
                    done.append((score / step**length_penalty, Hypothesis(alive[row], score)))
                continue
            keep_rows.append(row)
            keep_tokens.append(token)
            keep_scores.append(score)
            if len(keep_rows) == beam_size:
                break
        done.sort(key=lambda d: -d[0])
        del done[beam_size:]
        if not keep_rows:
            break
        if len(done) == beam_size and max(keep_scores) / step**length_penalty <= done[-1][0]:
            break  # no live beam can beat the worst finished one (scores only fall)
        while len(keep_rows) < beam_size:  # fewer live continuations than beams: pad with the last
            keep_rows.append(keep_rows[-1])
            keep_tokens.append(keep_tokens[-1])
            keep_scores.append(-torch.inf)
        rows = torch.tensor(keep_rows, device=prompt.device)
        alive = [alive[r] + [t] for r, t in zip(keep_rows, keep_tokens)]
        scores = torch.tensor(keep_scores, device=prompt.device)
        cache.reorder(rows)
        if step == max_new:
            break
        ids = torch.tensor(keep_tokens, device=prompt.device)[:, None]
        logprobs = model.logits(model.embed_tokens(ids), cache)[:, -1].log_softmax(-1)
    if not done:  # the length limit came first: the live beams are the answers
        done = [(float(s) / max(len(a), 1) ** length_penalty, Hypothesis(a, float(s))) for a, s in zip(alive, scores.tolist())]
        done.sort(key=lambda d: -d[0])
    return done[0][1]
