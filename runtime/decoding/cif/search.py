"""Tokens and times out of a Paraformer forward, as FunASR's ``Paraformer.inference`` reads them.

The label of each predicted token is its best one; ``blank``, ``sos`` and ``eos`` are dropped.
Times are FunASR's ``ts_prediction_lfr6_standard`` at ``upsample_rate`` 1 (60 ms frames): fire
positions shifted 1.5 frames early, a token lasting to the next fire (at most 12 frames, the rest
silence), the last one to the end (or halfway there when more than 5 frames remain). FunASR
calls it with the integration state (``fires``) where the function names the weights and the
weights where it names the peaks; the weights stay under 1, so the count check fails and the
peaks are re-integrated from the fires rescaled to ``tokens + 1`` (threshold 1 - 1e-4). That is
reproduced as FunASR runs it, so the times are FunASR's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

FRAME_SECONDS = 0.06  # 10 ms frames, LFR stride 6
FIRE_SHIFT = -1.5  # frames: FunASR's force_time_shift
START_END_THRESHOLD = 5  # frames of leading or trailing silence that get their own span
MAX_TOKEN_DURATION = 12  # frames a token may last; the rest of a gap is silence
PEAK = 1.0 - 1e-4


@dataclass(frozen=True)
class CifToken:
    id: int
    probability: float  # of the best label


def best_tokens(log_probs: Tensor, count: int, drop: tuple[int, ...]) -> list[CifToken]:
    """log_probs [N, V] (float32) of one utterance -> its tokens, the first ``count`` rows."""
    if count < 1:
        return []
    best, ids = log_probs[:count].max(dim=-1)
    return [CifToken(int(i), float(p)) for i, p in zip(ids.tolist(), best.exp().tolist()) if int(i) not in drop]


def _integrate(alphas: Tensor, threshold: float) -> Tensor:
    """FunASR's ``cif_wo_hidden``: the running sum per frame, less the threshold after a fire."""
    integrate = alphas.new_zeros(())
    out = []
    for alpha in alphas:
        integrate = integrate + alpha
        out.append(integrate)
        integrate = torch.where(integrate >= threshold, integrate - threshold, integrate)
    return torch.stack(out) if out else alphas.new_zeros(0)


def token_times(fires: Tensor, alphas: Tensor, n_tokens: int) -> list[tuple[int, int]]:
    """One utterance's fires [T] and weights [T] (its own frames, the tail included) -> a
    [start, end] in milliseconds per token, as FunASR derives them."""
    if n_tokens == 0:
        return []
    first, peaks = fires.float().clone(), alphas.float().clone()  # FunASR's argument order (see above)
    fire_place = torch.where(peaks >= PEAK)[0].cpu().numpy() + FIRE_SHIFT
    if len(fire_place) != n_tokens + 1:
        first = first / (first.sum() / (n_tokens + 1))
        peaks = _integrate(first, PEAK)
        fire_place = torch.where(peaks >= PEAK)[0].cpu().numpy() + FIRE_SHIFT
    if len(fire_place) == 0:
        return []
    frames = peaks.shape[0]
    spans: list[list[float]] = []
    silence: list[bool] = []
    if fire_place[0] > START_END_THRESHOLD:
        spans.append([0.0, fire_place[0] * FRAME_SECONDS])
        silence.append(True)
    for a, b in zip(fire_place[:-1], fire_place[1:]):
        if b - a <= MAX_TOKEN_DURATION:
            spans.append([a * FRAME_SECONDS, b * FRAME_SECONDS])
            silence.append(False)
        else:
            cut = a + MAX_TOKEN_DURATION
            spans += [[a * FRAME_SECONDS, cut * FRAME_SECONDS], [cut * FRAME_SECONDS, b * FRAME_SECONDS]]
            silence += [False, True]
    if frames - fire_place[-1] > START_END_THRESHOLD:
        end = (frames + fire_place[-1]) * 0.5
        spans[-1][1] = end * FRAME_SECONDS
        spans.append([end * FRAME_SECONDS, frames * FRAME_SECONDS])
        silence.append(True)
    elif spans:
        spans[-1][1] = frames * FRAME_SECONDS
    return [(int(a * 1000), int(b * 1000)) for (a, b), quiet in zip(spans, silence) if not quiet][:n_tokens]


def utterance_frames(alphas: Tensor, length: int, tail: bool) -> int:
    """How many of an utterance's (padded) predictor frames its times are read from: its own,
    and the tail frame FunASR adds after them."""
    return min(length + (1 if tail else 0), alphas.shape[-1])

