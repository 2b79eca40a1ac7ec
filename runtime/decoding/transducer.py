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
    b, t_max, _ = f_all.shape
    device = f_all.device
    rows = torch.arange(b, device=device)
    n_labels = blank_id + 1
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
