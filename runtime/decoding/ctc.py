"""Greedy CTC decoding: the best label per frame, repeats collapsed, blanks dropped.

Each emitted token keeps the frames it spans (its run of identical best labels) and its
probability (the mean of the frame probabilities over the run), which is what word timestamps
are made of. Shapes: T frames, V labels.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass(frozen=True)
class CtcToken:
    id: int
    first_frame: int  # the run of frames where this label was the best one: [first, last]
    last_frame: int
    probability: float


def greedy_ctc(log_probs: Tensor, blank_id: int) -> list[CtcToken]:
    """log_probs [T, V] (log-softmax over labels) -> the emitted tokens in order."""
    if log_probs.shape[0] == 0:
        return []
    best_lp, best = log_probs.float().max(dim=-1)  # [T]
    best, prob = best.tolist(), best_lp.exp().tolist()
    tokens: list[CtcToken] = []
    start = 0
    for t in range(1, len(best) + 1):
        if t < len(best) and best[t] == best[start]:
            continue
        label = best[start]
        if label != blank_id:
            run = prob[start:t]
            tokens.append(CtcToken(label, start, t - 1, sum(run) / len(run)))
        start = t
    return tokens

