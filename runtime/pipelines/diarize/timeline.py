"""Speech regions + a speaker embedder -> speaker turns: the model-free half of diarization.

    regions -> sliding windows -> embeddings -> clustering -> a label per 10 ms frame
            -> smoothing (short turns absorbed, close same-speaker turns merged) -> turns

The embedder is a function, so the orchestration can be tested with synthetic embeddings whose
speakers are known by construction (a model-driven test cannot tell a wrong pipeline from a
weak embedder).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ...options import DiarizeOptions
from ...results import SpeakerTurn
from . import clustering

FRAME = 0.01  # seconds: the resolution of turn boundaries
SPECTRAL_MAX_SPEAKERS = 8  # the eigengap search range without --max-speakers

Region = tuple[float, float]
Embedder = Callable[[list[Region]], np.ndarray]  # n windows -> [n, E] L2-normalised


def sliding_windows(regions: Sequence[Region], window: float, step: float, min_window: float) -> list[Region]:
    """Windows over each region: the whole region when it is at most ``window`` long, else
    ``window``-long windows every ``step`` seconds with the last one flush with the region's end.
    Regions shorter than ``min_window`` get none (too short to embed reliably; they take the
    speaker of the nearest window)."""
    windows: list[Region] = []
    for a, b in regions:
        length = b - a
        if length < min_window:
            continue
        if length <= window:
            windows.append((a, b))
            continue
        n = int(np.ceil((length - window) / step)) + 1
        starts = [min(a + i * step, b - window) for i in range(n)]
        windows.extend((s, s + window) for s in dict.fromkeys(starts))
    return windows


def cluster(embeddings: np.ndarray, options: DiarizeOptions) -> np.ndarray:
    """embeddings [N, E] -> speaker labels [N], within the options' speaker-count range."""
    o = options
    if o.clustering == "spectral":
        labels = clustering.spectral(
            embeddings,
            prune=o.spectral_prune,
            num=o.num_speakers,
            low=o.min_speakers,
            high=o.max_speakers if o.max_speakers is not None else max(SPECTRAL_MAX_SPEAKERS, o.min_speakers),
        )
    else:
        labels = clustering.agglomerative(
            embeddings, o.threshold, num=o.num_speakers, low=o.min_speakers, high=o.max_speakers
        )
    if o.num_speakers is None:
        labels = clustering.dissolve_small(labels, o.min_speaker_windows, keep=o.min_speakers)
    return clustering.refine(embeddings, labels)


def frame_labels(regions: Sequence[Region], windows: Sequence[Region], labels: np.ndarray, n_frames: int) -> np.ndarray:
    """A speaker per frame: -1 outside speech, else the label of the window whose centre is
    nearest (windows of one speaker region first, then any). [n_frames] int."""
    out = np.full(n_frames, -1, dtype=np.int64)
    if not len(windows):
        return out
    centres = np.asarray([(a + b) / 2 for a, b in windows])
    order = np.argsort(centres, kind="stable")
    centres, labels = centres[order], np.asarray(labels)[order]
    for a, b in regions:
        i0, i1 = int(round(a / FRAME)), min(int(round(b / FRAME)), n_frames)
        if i1 <= i0:
            continue
        t = (np.arange(i0, i1) + 0.5) * FRAME
        inside = np.flatnonzero((centres >= a) & (centres <= b))
        pool = inside if len(inside) else np.arange(len(centres))
        c = centres[pool]
        j = np.clip(np.searchsorted(c, t), 1, max(len(c) - 1, 1))
        if len(c) == 1:
            nearest = np.zeros(len(t), dtype=np.int64)
        else:
            nearest = np.where(np.abs(t - c[j - 1]) <= np.abs(c[j] - t), j - 1, j)
        out[i0:i1] = labels[pool[nearest]]
    return out


def _runs(frames: np.ndarray) -> list[list[int]]:
    """[label, first frame, end frame) of each run of one speaker (silence, -1, excluded)."""
    runs: list[list[int]] = []
    edges = np.flatnonzero(np.diff(frames)) + 1
    for s, e in zip(np.concatenate(([0], edges)), np.concatenate((edges, [len(frames)]))):
        if frames[s] >= 0:
            runs.append([int(frames[s]), int(s), int(e)])
    return runs


def smooth(frames: np.ndarray, min_turn: float, merge_gap: float) -> list[list[int]]:
    """Turns as [label, first frame, end frame) after two passes:

    - a turn shorter than ``min_turn`` seconds touching another speaker's turn is relabelled to
      its longer touching neighbour (shortest first; an isolated short turn between pauses stays);
    - same-speaker turns less than ``merge_gap`` seconds apart are joined over the pause.
    """
    runs = _runs(frames)
    min_frames, gap_frames = min_turn / FRAME, merge_gap / FRAME
    while True:
        touching = []
        for i, (label, s, e) in enumerate(runs):
            if e - s >= min_frames:
                continue
            before = runs[i - 1] if i > 0 and runs[i - 1][2] == s else None
            after = runs[i + 1] if i + 1 < len(runs) and runs[i + 1][1] == e else None
            if before or after:
                touching.append((e - s, i, before, after))
        if not touching:
            break
        _, i, before, after = min(touching)
        choices = [r for r in (before, after) if r is not None]
        runs[i][0] = max(choices, key=lambda r: r[2] - r[1])[0]
        runs = _joined(runs, 0)
    return _joined(runs, gap_frames)


def _joined(runs: list[list[int]], gap_frames: float) -> list[list[int]]:
    out: list[list[int]] = []
    for label, s, e in runs:
        if out and out[-1][0] == label and s - out[-1][2] <= gap_frames:
            out[-1][2] = e
        else:
            out.append([label, s, e])
    return out


def speaker_name(index: int) -> str:
    return f"SPEAKER_{index:02d}"


def diarize_regions(
    regions: Sequence[Region], duration: float, embed: Embedder, options: DiarizeOptions
) -> list[SpeakerTurn]:
    """Speaker turns over the speech ``regions`` of a ``duration``-second recording."""
    o = options
    regions = [(max(0.0, a), min(duration, b)) for a, b in regions if min(duration, b) > max(0.0, a)]
    if not regions:
        return []
    windows = sliding_windows(regions, o.window, o.step, o.min_window)
    if not windows:  # only short bursts: embed them as they are
        windows = list(regions)
    embeddings = embed(windows)
    labels = cluster(embeddings, o) if len(windows) > 1 else np.zeros(1, dtype=np.int64)
    n_frames = int(np.ceil(duration / FRAME))
    runs = smooth(frame_labels(regions, windows, labels, n_frames), o.min_turn, o.merge_gap)
    names: dict[int, str] = {}
    turns = []
    for label, s, e in runs:
        name = names.setdefault(label, speaker_name(len(names)))
        turns.append(SpeakerTurn(round(s * FRAME, 3), round(min(e * FRAME, duration), 3), name))
    return turns
