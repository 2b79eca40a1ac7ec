"""CTC decoding. Greedy: the best label per frame, repeats collapsed, blanks dropped. Prefix beam
search (``beam_ctc``): the most probable label sequence summed over its alignments.

Each emitted token keeps the frames it spans (its run of identical best labels) and its
probability (the mean of the frame probabilities over the run), which is what word timestamps
are made of. Shapes: T frames, V labels.
"""

from __future__ import annotations

import math
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



def _logaddexp(a: float, b: float) -> float:
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    hi, lo = (a, b) if a > b else (b, a)
    return hi + math.log1p(math.exp(lo - hi))


def beam_ctc(log_probs: Tensor, blank_id: int, beam_size: int) -> list[CtcToken]:
    """Prefix beam search over log_probs [T, V]: the best prefix after the last frame.

    Each prefix keeps the probabilities of ending in a blank and in its last label, so repeats
    separated by a blank stay two labels. Per frame only the ``beam_size`` best labels (and the
    blank) extend a prefix. A token's frames are the frame that first appended it.
    """
    lp = log_probs.float()
    n_frames = lp.shape[0]
    # prefix -> (log p ending in blank, log p ending in its last label)
    beams: dict[tuple[int, ...], tuple[float, float]] = {(): (0.0, -math.inf)}
    frames: dict[tuple[int, ...], tuple[int, ...]] = {(): ()}
    top = min(beam_size, lp.shape[1])
    for t in range(n_frames):
        row = lp[t].tolist()
        candidates = set(lp[t].topk(top).indices.tolist()) | {blank_id}
        nxt: dict[tuple[int, ...], list[float]] = {}

        def add(prefix, blank_part=-math.inf, label_part=-math.inf):
            entry = nxt.setdefault(prefix, [-math.inf, -math.inf])
            entry[0] = _logaddexp(entry[0], blank_part)
            entry[1] = _logaddexp(entry[1], label_part)

        for prefix, (p_b, p_l) in beams.items():
            total = _logaddexp(p_b, p_l)
            for c in candidates:
                p = row[c]
                if c == blank_id:
                    add(prefix, blank_part=total + p)
                    continue
                extended = prefix + (c,)
                if extended not in frames:
                    frames[extended] = frames[prefix] + (t,)
                if prefix and prefix[-1] == c:
                    add(extended, label_part=p_b + p)  # a repeat needs a blank between
                    add(prefix, label_part=p_l + p)  # else it collapses into the same label
                else:
                    add(extended, label_part=total + p)
        ranked = sorted(nxt.items(), key=lambda kv: _logaddexp(*kv[1]), reverse=True)[:beam_size]
        beams = {k: (v[0], v[1]) for k, v in ranked}
    best = max(beams, key=lambda k: _logaddexp(*beams[k]))
    return [CtcToken(c, f, f, math.exp(lp[f, c].item())) for c, f in zip(best, frames[best])]
