"""CREPE activations -> a pitch bin and a frequency per frame.

Three decoders over the 360-bin activation grid [T, 360] (sigmoid outputs, bins 20 cents apart):

- ``weighted``: the original CREPE's local average: the argmax bin and the activation-weighted
  mean of the cents of the bins within 4 of it, so the frequency is not quantised to 20 cents;
- ``viterbi``: torchcrepe's smoothing: a softmax over the bins of each frame as the observation
  probability, a transition that allows jumps of at most 11 bins (weights 12 - |jump|), and the
  most likely bin path (as librosa.sequence.viterbi finds it), without torchcrepe's pull towards
  the ends of the range (``_jump_logs``);
- ``argmax``: the most active bin.

Bins outside ``[fmin, fmax]`` are excluded as torchcrepe excludes them (bins below
floor(bin(fmin)) and from ceil(bin(fmax)) up). The confidence of a frame is the activation of its
decoded bin (torchcrepe's periodicity). torchcrepe's triangular dithering of bin centres is
random and left out.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ..models.crepe import CENTS_OFFSET, CENTS_PER_BIN, PITCH_BINS, bins_to_cents, cents_to_hz

DECODERS = ("weighted", "viterbi", "argmax")
LOCAL_RADIUS = 4  # bins on each side of the argmax in the weighted average (CREPE's)
MAX_JUMP = 12  # viterbi transition weights: max(12 - |i - j|, 0)
OBSERVATION_BLOCK = 4096  # frames whose log observation probabilities are held at once (float64)
MIN_HZ = float(cents_to_hz(torch.tensor(CENTS_OFFSET, dtype=torch.float64)))  # bin 0, about 31.7 Hz
MAX_HZ = float(cents_to_hz(torch.tensor(CENTS_OFFSET + CENTS_PER_BIN * (PITCH_BINS - 1), dtype=torch.float64)))


def bin_range(fmin: float, fmax: float) -> tuple[int, int]:
    """The allowed bins ``[lo, hi)`` for ``fmin``..``fmax`` Hz, as torchcrepe computes them."""

    def position(hz: float) -> float:
        return (1200.0 * math.log2(hz / 10.0) - CENTS_OFFSET) / CENTS_PER_BIN

    lo = min(max(math.floor(position(fmin)), 0), PITCH_BINS)
    hi = min(max(math.ceil(position(fmax)), 0), PITCH_BINS)
    return lo, hi


def decode(activation: Tensor, decoder: str, fmin: float, fmax: float) -> tuple[Tensor, Tensor, Tensor]:
    """activation [T, 360] -> (bins [T] int64, frequency [T] Hz float32, confidence [T] float32)."""
    lo, hi = bin_range(fmin, fmax)
    if activation.shape[0] == 0:
        empty = activation.new_zeros(0)
        return empty.long(), empty, empty
    masked = activation.float().clone()
    masked[:, :lo] = float("-inf")
    masked[:, hi:] = float("-inf")
    if decoder == "viterbi":
        bins = viterbi(masked)
        cents = bins_to_cents(bins.float())
    elif decoder == "argmax":
        bins = masked.argmax(dim=1)
        cents = bins_to_cents(bins.float())
    elif decoder == "weighted":
        bins = masked.argmax(dim=1)
        cents = local_average_cents(masked.clamp_min(0.0), bins)
    else:
        raise ValueError(f"unknown decoder {decoder!r}; choose {', '.join(DECODERS)}")
    confidence = activation.float().gather(1, bins[:, None])[:, 0]
    return bins, cents_to_hz(cents).float(), confidence


def local_average_cents(weights: Tensor, bins: Tensor) -> Tensor:
    """weights [T, 360] >= 0, bins [T] -> the weighted mean cents of bins - 4 .. bins + 4 [T]."""
    offsets = torch.arange(-LOCAL_RADIUS, LOCAL_RADIUS + 1, device=bins.device)
    window = bins[:, None] + offsets  # [T, 9]
    inside = (window >= 0) & (window < PITCH_BINS)
    w = weights.gather(1, window.clamp(0, PITCH_BINS - 1)) * inside
    total = w.sum(dim=1)
    centre = (w * bins_to_cents(window.float())).sum(dim=1) / total.clamp_min(1e-12)
    # A frame with no weight near its argmax (all zero): the argmax bin's own cents.
    return torch.where(total > 0, centre, bins_to_cents(bins.float()))


def _jump_logs() -> np.ndarray:
    """log transition probability of each jump -11..11 [23].

    Every row is divided by the total of a full row (144). torchcrepe normalises each row of its
    360 x 360 matrix instead, so rows near the ends of the range, which lose neighbours, get
    larger entries: a path there keeps gaining, and with its default fmax (2006 Hz, bin 359
    allowed) torchcrepe's path sticks to the top bin. Away from the ends the two are identical.
    """
    jumps = np.arange(-(MAX_JUMP - 1), MAX_JUMP)
    weights = (MAX_JUMP - np.abs(jumps)).astype(np.float64)
    return np.log(weights / weights.sum())


def _log_observations(masked: Tensor) -> np.ndarray:
    """[T, 360] -> log of each frame's softmax over the bins, floored as librosa floors it."""
    probs = torch.softmax(masked.double(), dim=1).cpu().numpy()
    return np.log(probs + np.finfo(np.float64).tiny)


def viterbi(masked: Tensor) -> Tensor:
    """masked activations [T, 360] (excluded bins -inf) -> the most likely bin path [T] int64.

    Only jumps of at most 11 bins have weight, so each step compares 23 predecessors per bin
    instead of 360: O(T * 360 * 23).
    """
    log_jump = _jump_logs()
    steps, n = masked.shape
    reach = MAX_JUMP - 1
    back = np.empty((steps, n), dtype=np.int16)
    score = np.zeros(n) - math.log(n)  # uniform start, before the first observation
    sources = np.arange(n)[:, None] + np.arange(-reach, reach + 1)[None, :]  # [360, 23] predecessor ids
    valid = (sources >= 0) & (sources < n)
    sources = np.where(valid, sources, 0)
    edge = np.where(valid, log_jump[None, :], -np.inf)  # log weight of source -> target, by offset
    for first in range(0, steps, OBSERVATION_BLOCK):
        log_obs = _log_observations(masked[first : first + OBSERVATION_BLOCK])
        for t in range(first, first + len(log_obs)):
            if t > 0:
                cand = score[sources] + edge  # [360 targets, 23 sources]
                best = cand.argmax(axis=1)
                back[t] = sources[np.arange(n), best]
                score = cand[np.arange(n), best]
            score = score + log_obs[t - first]
    path = np.empty(steps, dtype=np.int64)
    path[-1] = int(score.argmax())
    for t in range(steps - 1, 0, -1):
        path[t - 1] = back[t, path[t]]
    return torch.from_numpy(path).to(masked.device)
