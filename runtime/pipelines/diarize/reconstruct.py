"""Local speakers and their global labels -> who speaks when, overlaps included (pyannote 3.1's
``reconstruct`` and ``to_diarization``).

Each window's activity is mapped onto the global speakers (a speaker takes the activity of the
local speakers assigned to it), the overlapping windows are averaged frame by frame, and in each
frame the ``count`` most active speakers are kept, where ``count`` is the number of simultaneous
speakers the segmentation itself saw there (averaged over the windows, rounded up from
``COUNT_ROUNDING`` above a whole number): so two people can speak at once. The exclusive view
keeps at most one. Pauses shorter than ``MIN_GAP`` seconds inside one speaker's speech are
filled (pyannote's ``min_duration_off``). Shapes: N windows, T frames per window,
K local speakers, S global speakers, F global frames.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ...results import SpeakerTurn
from .segmentation import Segmentation

# Tuned by pooled DER on trn01-trn09 only (benchmarks/diarize_tune.py): the segmentation's
# averaged count falls short on far-field speech, so 1.3 already counts two speakers (pyannote
# rounds at .5: 0.3 took the missed speech from 11.6 to 10.4 points there, DER 19.1 -> 18.3%).
COUNT_ROUNDING = 0.3
MIN_GAP = 0.25  # 0.25 s: DER 18.3 -> 18.2% on trn01-trn09 (0.5 s: 18.4%)


def _aggregate(seg: Segmentation, blocks: Iterable[np.ndarray], frames: int, width: int) -> np.ndarray:
    """blocks: [T, D] per window, in window order (an [N, T, D] array is such) -> [F, D]: the
    mean over the windows covering each frame (0 where none)."""
    total = np.zeros((frames, width), dtype=np.float64)
    covered = np.zeros((frames, 1), dtype=np.float64)
    for block, first in zip(blocks, seg.first_frames):
        total[first : first + len(block)] += block
        covered[first : first + len(block)] += 1
    return total / np.maximum(covered, 1)


def speaker_count(seg: Segmentation, frames: int) -> np.ndarray:
    """[F] how many speakers talk in each frame, as the segmentation says."""
    mean = _aggregate(seg, seg.activity.sum(axis=2, keepdims=True), frames, 1)[:, 0]
    return np.floor(mean + 1.0 - COUNT_ROUNDING).astype(np.int64)


def global_activity(seg: Segmentation, labels: np.ndarray, speakers: int, frames: int, values: np.ndarray | None = None) -> np.ndarray:
    """labels [N, K] (-1: unassigned) -> [F, S] averaged activity of each global speaker (or of
    ``values`` [N, T, K], such as ``seg.probability``)."""
    values = seg.activity if values is None else values

    def blocks():  # one window at a time: all of them at once were 4x the result (2.5 s steps)
        block = np.empty((values.shape[1], speakers), dtype=np.float32)
        for w in range(len(values)):
            block.fill(0)
            for c in np.flatnonzero(labels[w] >= 0):
                np.maximum(block[:, labels[w, c]], values[w, :, c], out=block[:, labels[w, c]])
            yield block

    return _aggregate(seg, blocks(), frames, speakers)


def binarize(activations: np.ndarray, count: np.ndarray, probability: np.ndarray | None = None) -> np.ndarray:
    """[F, S] activations, [F] counts -> [F, S] 0/1: the ``count`` most active speakers of each
    frame (only speakers with some activity there), or with ``probability`` [F, S] (averaged as
    the activations are) the ``count`` most probable of those. The activity of two speakers is
    often the same (both held in every window), and its order was then the speakers' numbering:
    by probability, DER 21.3% -> 21.0% on trn01-09 and the 40 long training files, and in the
    exclusive view (one speaker a frame, which words are attributed by) confusion 3.3 -> 2.8 points."""
    score = activations if probability is None else np.where(activations > 0, probability, 0.0)
    order = np.argsort(-score, axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(activations.shape[1])[None, :].repeat(len(order), 0), axis=1)
    return (rank < count[:, None]) & (activations > 0)


def turns_from_frames(
    binary: np.ndarray, seg: Segmentation, sample_rate: int, duration: float, min_gap: float = MIN_GAP, names: tuple[str, ...] = ()
) -> list[SpeakerTurn]:
    """[F, S] 0/1 -> turns sorted by start, speakers named in order of first speech (``names``
    first, then SPEAKER_NN); a speaker's turns less than ``min_gap`` seconds apart are joined."""
    half = seg.frame_step / 2
    runs = []
    for s in range(binary.shape[1]):
        x = np.concatenate(([0], binary[:, s].astype(np.int8), [0]))
        edges = np.flatnonzero(np.diff(x))
        last = None
        for a, b in zip(edges[::2], edges[1::2]):
            start = max(0.0, (a * seg.frame_step + seg.frame_offset - half) / sample_rate)
            end = min(duration, (b * seg.frame_step + seg.frame_offset - half) / sample_rate)
            if end <= start:
                continue
            if last is not None and start - runs[last][1] < min_gap:
                runs[last] = (runs[last][0], end, s)
            else:
                last = len(runs)
                runs.append((start, end, s))
    runs.sort()
    labels: dict[int, str] = {}
    for _, _, s in runs:
        if s not in labels:
            labels[s] = names[len(labels)] if len(labels) < len(names) else f"SPEAKER_{len(labels):02d}"
    return [SpeakerTurn(round(a, 3), round(b, 3), labels[s]) for a, b, s in runs]
