"""Greedy RNN-T and TDT decoding by batched label looping (NeMo's strategy), apart from the network.

Per step, every row still searching advances over blanks with the joint alone (the prediction
network's output does not change on a blank); once each live row has found a label, one batched
prediction-network call consumes all of them. A row may emit at most ``max_symbols`` labels in
a row without advancing a frame, after which it is moved on (a guard against loops). TDT joints
also give a duration: the frame pointer moves by it (a blank moves at least one frame).

The model supplies ``project_encoder``, ``predict(labels [B], state) -> (g [B, J], state)`` and
``joint_logits(f [B, J], g [B, J]) -> [B, V (+K)]``. Shapes: B batch, T frames, J joint width,
V labels with the blank, K durations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor


@dataclass(frozen=True)
class TransducerToken:
    id: int
    frame: int  # encoder frame at which it was emitted
    duration: int  # frames it spans: the TDT duration, 1 for RNN-T
    probability: float  # softmax over the labels at the emitting step


def _where_state(mask: Tensor, new, old):
    return tuple(torch.where(mask[None, :, None], n, o) for n, o in zip(new, old))


@torch.no_grad()
def greedy_transducer(
    model,
    encoded: Tensor,
    lengths: Tensor,
    *,
    blank_id: int,
    durations: Sequence[int] = (),
    max_symbols: int = 10,
) -> list[list[TransducerToken]]:
    """encoded [B, T, C] (encoder output), lengths [B] -> each row's emitted tokens in order."""
    f_all = model.project_encoder(encoded)
    if f_all.shape[0] == 1:
        return [_greedy_one(model, f_all[0], int(lengths[0]), blank_id, list(durations), max_symbols)]
    b, t_max, _ = f_all.shape
    device = f_all.device
    rows = torch.arange(b, device=device)
    tdt = len(durations) > 0
    duration_values = torch.tensor(list(durations) or [0], device=device)
    lengths = lengths.to(device)
    frame = torch.zeros(b, dtype=torch.long, device=device)
    symbols = torch.zeros(b, dtype=torch.long, device=device)
    g, state = model.predict(torch.full((b,), blank_id, dtype=torch.long, device=device), None)
    out: list[list[TransducerToken]] = [[] for _ in range(b)]
    active = frame < lengths

    def step(frames: Tensor):
        logits = model.joint_logits(f_all[rows, frames.clamp(max=max(t_max - 1, 0))], g).float()
        n_labels = logits.shape[-1] - len(durations)  # the labels, the blank among them (last for NeMo, first for icefall)
        logp = logits[:, :n_labels].log_softmax(-1)
        best, label = logp.max(-1)
        if tdt:
            advance = duration_values[logits[:, n_labels:].argmax(-1)]
        else:
            advance = (label == blank_id).long()  # RNN-T: a blank moves one frame, a label none
        return label, best, advance

    while bool(active.any()):
        label, best, advance = step(frame)
        searching = active & (label == blank_id)
        while bool(searching.any()):  # blanks: move on with the joint alone
            frame = frame + torch.where(searching, advance.clamp(min=1), 0)
            symbols = torch.where(searching, 0, symbols)
            searching &= frame < lengths
            if not bool(searching.any()):
                break
            n_label, n_best, n_advance = step(frame)
            label = torch.where(searching, n_label, label)
            best = torch.where(searching, n_best, best)
            advance = torch.where(searching, n_advance, advance)
            searching &= n_label == blank_id
        found = active & (frame < lengths) & (label != blank_id)
        if not bool(found.any()):
            break
        for r in found.nonzero()[:, 0].tolist():
            out[r].append(TransducerToken(int(label[r]), int(frame[r]), int(advance[r]) if tdt else 1, float(best[r].exp())))
        stay = found & (advance == 0)
        symbols = torch.where(found, torch.where(stay, symbols + 1, 0), symbols)
        forced = found & (symbols >= max_symbols)
        advance = torch.where(forced, advance.clamp(min=1), advance)
        symbols = torch.where(forced, 0, symbols)
        frame = frame + torch.where(found, advance, 0)
        g_new, state_new = model.predict(torch.where(found, label, blank_id), state)
        g = torch.where(found[:, None], g_new, g)
        state = _where_state(found, state_new, state)
        active = frame < lengths
    return out


# The most frames the joint scores at once while an RNN-T row looks for its next label: the
# prediction network's output does not change on a blank, so one [W, J] joint call replaces W
# single-frame calls. After a label the look-ahead starts at one frame (the next label is often
# on the same frame or the next) and doubles over each stretch of blanks: a dense stretch costs
# no wasted frames, a silence a few calls.
WINDOW = 32


def _greedy_one(model, f: Tensor, length: int, blank_id: int, durations: list[int], max_symbols: int) -> list[TransducerToken]:
    """``greedy_transducer`` of one row, f [T, J]: the same steps without the batch's masks and
    syncs (half the time on one recording); RNN-T rows look for the next label over a doubling
    look-ahead of frames."""
    if durations:
        return _greedy_one_tdt(model, f, length, blank_id, durations, max_symbols)
    g, state = model.predict(torch.full((1,), blank_id, dtype=torch.long, device=f.device), None)
    out: list[TransducerToken] = []
    frame = symbols = 0
    width = 1
    while frame < length:
        end = min(frame + width, length)
        best, labels = model.joint_logits(f[frame:end], g.expand(end - frame, -1)).float().log_softmax(-1).max(-1)
        emitting = (labels != blank_id).nonzero()
        if len(emitting) == 0:  # blanks to the look-ahead's end
            frame, symbols, width = end, 0, min(2 * width, WINDOW)
            continue
        i = int(emitting[0, 0])
        if i:
            frame, symbols = frame + i, 0
        label = int(labels[i])
        out.append(TransducerToken(label, frame, 1, float(best[i].exp())))
        symbols += 1  # a label does not move the frame, unless it is the row's max_symbols-th there
        if symbols >= max_symbols:
            frame, symbols = frame + 1, 0
        width = 1
        g, state = model.predict(torch.full((1,), label, dtype=torch.long, device=f.device), state)
    return out


def _greedy_one_tdt(model, f: Tensor, length: int, blank_id: int, durations: list[int], max_symbols: int) -> list[TransducerToken]:
    """``_greedy_one`` of a TDT row, a frame at a time: a blank's predicted duration decides which
    frame is scored next."""
    g, state = model.predict(torch.full((1,), blank_id, dtype=torch.long, device=f.device), None)
    out: list[TransducerToken] = []
    frame = symbols = 0
    while frame < length:
        logits = model.joint_logits(f[frame : frame + 1], g).float()
        n_labels = logits.shape[-1] - len(durations)
        best, label = logits[:, :n_labels].log_softmax(-1).max(-1)
        label = int(label)
        advance = durations[int(logits[0, n_labels:].argmax())]
        if label == blank_id:  # the prediction network's output does not change on a blank
            frame += max(advance, 1)
            symbols = 0
            continue
        out.append(TransducerToken(label, frame, advance, float(best.exp())))
        symbols = symbols + 1 if advance == 0 else 0
        if symbols >= max_symbols:
            advance, symbols = max(advance, 1), 0
        frame += advance
        g, state = model.predict(torch.full((1,), label, dtype=torch.long, device=f.device), state)
    return out


# --- beam search ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TransducerHypothesis:
    tokens: list[TransducerToken]
    score: float  # log probability of its alignment: the sum of the chosen labels' and blanks' log-softmax


class _Hyp:
    """One beam entry: its labels, where they were emitted, its score, and the prediction-network
    state before its last label (the output after it is computed when the entry is expanded)."""

    __slots__ = ("labels", "frames", "probs", "score", "state")

    def __init__(self, labels, frames, probs, score, state):
        self.labels, self.frames, self.probs, self.score, self.state = labels, frames, probs, score, state


@torch.no_grad()
def beam_transducer(
    model,
    encoded: Tensor,
    lengths: Tensor,
    *,
    blank_id: int,
    beam_size: int,
    max_expansions: int = 10,
) -> list[TransducerHypothesis]:
    """RNN-T beam search with NeMo's ``beam`` strategy (``BeamRNNTInfer.default_beam_search``):
    encoded [B, T, C], lengths [B] -> each row's best hypothesis.

    Per frame the best unfinished hypothesis is expanded by a blank (it is then finished for this
    frame) and by its ``beam_size`` best labels (they stay on the frame); the frame ends once
    ``beam_size`` finished hypotheses score above every unfinished one. Hypotheses are not merged.
    The winner has the best score per label (NeMo's ``score_norm``: score / (labels + 1)).
    ``beam_size`` 1 is greedy decoding, as in NeMo. The rows advance together: each step expands
    one hypothesis per row, their prediction-network and joint calls batched. A frame that
    takes more than ``beam_size * max_expansions`` expansions (a joint that almost never
    emits a blank) ends with the best ``beam_size`` of all its hypotheses, finished or not.
    """
    if beam_size == 1:
        rows = greedy_transducer(model, encoded, lengths, blank_id=blank_id, max_symbols=max_expansions)
        return [TransducerHypothesis(r, float("nan")) for r in rows]
    f_all = model.project_encoder(encoded)
    b = f_all.shape[0]
    device = f_all.device
    n_labels = blank_id + 1
    beam = min(beam_size, blank_id)  # NeMo's bounds: the beam at most the labels, the label fan-out one less
    top = max(1, min(beam, blank_id - 1))
    lengths = lengths.tolist()
    start_g, start_state = model.predict(torch.full((1,), blank_id, dtype=torch.long, device=device), None)
    cache: list[dict] = [{(): (start_g[0], tuple(s[:, 0] for s in start_state))} for _ in range(b)]
    kept = [[_Hyp((), (), (), 0.0, None)] for _ in range(b)]
    frame = [0] * b
    hyps: list[list[_Hyp]] = [list(k) for k in kept]
    finished: list[list[_Hyp]] = [[] for _ in range(b)]
    steps = [0] * b
    while True:
        live = [r for r in range(b) if frame[r] < lengths[r]]
        if not live:
            break
        chosen = []
        for r in live:
            best = max(hyps[r], key=lambda h: h.score)
            hyps[r].remove(best)
            chosen.append(best)
        # prediction outputs of the chosen entries not seen before: one batched call
        missing = [i for i, (r, h) in enumerate(zip(live, chosen)) if h.labels not in cache[r]]
        if missing:
            labels = torch.tensor([chosen[i].labels[-1] for i in missing], device=device)
            state = tuple(torch.stack([chosen[i].state[k] for i in missing], dim=1) for k in range(len(chosen[missing[0]].state)))
            g_new, state_new = model.predict(labels, state)
            for j, i in enumerate(missing):
                cache[live[i]][chosen[i].labels] = (g_new[j], tuple(s[:, j] for s in state_new))
        g = torch.stack([cache[r][h.labels][0] for r, h in zip(live, chosen)])
        f = f_all[live, [frame[r] for r in live]]
        logp = model.joint_logits(f, g).float()[:, :n_labels].log_softmax(-1)
        label_lp, label_ids = logp[:, :blank_id].topk(top, dim=-1)
        blank_lp, label_lp, label_ids = logp[:, blank_id].tolist(), label_lp.tolist(), label_ids.tolist()
        for i, (r, h) in enumerate(zip(live, chosen)):
            after = cache[r][h.labels][1]
            finished[r].append(_Hyp(h.labels, h.frames, h.probs, h.score + blank_lp[i], h.state))
            for lp, k in zip(label_lp[i], label_ids[i]):
                hyps[r].append(_Hyp(h.labels + (k,), h.frames + (frame[r],), h.probs + (math.exp(lp),), h.score + lp, after))
            steps[r] += 1
            best_open = max(x.score for x in hyps[r])
            ahead = sorted((x for x in finished[r] if x.score > best_open), key=lambda x: x.score)
            if len(ahead) >= beam or steps[r] >= beam * max_expansions:
                if len(ahead) < beam:  # the guard: the best of everything goes on
                    ahead = sorted(finished[r] + hyps[r], key=lambda x: x.score)[-beam:]
                kept[r] = ahead
                frame[r] += 1
                hyps[r], finished[r], steps[r] = list(ahead), [], 0
    out = []
    for r in range(b):
        best = max(kept[r], key=lambda h: h.score / (len(h.labels) + 1))
        out.append(TransducerHypothesis([TransducerToken(k, t, 1, p) for k, t, p in zip(best.labels, best.frames, best.probs)], best.score))
    return out
