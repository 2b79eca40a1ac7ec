"""Diarization error rate: missed speech, false alarm and speaker confusion over reference speech.

Scored as pyannote.metrics' ``DiarizationErrorRate`` does (the tests check agreement to 1e-6):

- the scoring region is the UEM (without one: from the earliest to the latest turn of either
  side), less a collar around every reference turn boundary (``collar`` is the collar's whole
  width, half before and half after the boundary, pyannote's convention: md-eval's ``-c 0.25``
  is ``collar=0.5``), less the regions where reference speakers overlap with ``skip_overlap``;
- hypothesis speakers are mapped one-to-one onto reference speakers to maximise the time they
  share (Hungarian algorithm, scipy's ``linear_sum_assignment``); unmapped speakers match nobody;
- in each stretch with ``r`` reference and ``h`` hypothesis speakers, ``c`` of them matched:
  total += r, missed += max(0, r - h), false alarm += max(0, h - r), confusion += min(r, h) - c,
  each weighted by the stretch's duration.

A speaker's turns count as their union (md-eval's convention): pyannote.metrics would count a
stretch where one speaker's turns overlap once per turn. The two agree whenever no speaker
overlaps themselves, as in every RTTM oasr writes and in the AMI references.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np

from ..errors import InputError
from ..results import SpeakerTurn

Regions = list[tuple[float, float]]


@dataclass(frozen=True)
class DerComponents:
    """Seconds of each error kind (overlapped speech counts once per speaker)."""

    file: str
    total: float = 0.0  # reference speech scored
    missed: float = 0.0  # reference speech with too few hypothesis speakers
    false_alarm: float = 0.0  # hypothesis speech beyond the reference speakers
    confusion: float = 0.0  # speech given to the wrong (mapped) speaker
    correct: float = 0.0
    mapping: dict[str, str] = field(default_factory=dict)  # hypothesis speaker -> reference speaker

    @property
    def der(self) -> float:
        """(missed + false alarm + confusion) / total; 0 with nothing to score, 1 for errors on nothing."""
        error = self.missed + self.false_alarm + self.confusion
        if self.total == 0:
            return 0.0 if error == 0 else 1.0
        return error / self.total

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "der": self.der}


@dataclass(frozen=True)
class DerReport:
    files: tuple[DerComponents, ...]
    collar: float
    skip_overlap: bool
    unscored: tuple[str, ...] = ()  # hypothesis file ids in neither the reference nor the UEM

    @property
    def pooled(self) -> DerComponents:
        """The components summed over every file (the pooled DER weighs files by their speech)."""
        sums = {k: sum(getattr(f, k) for f in self.files) for k in ("total", "missed", "false_alarm", "confusion", "correct")}
        return DerComponents(file="*", **sums)

    def to_dict(self) -> dict[str, Any]:
        return {
            "collar": self.collar,
            "skip_overlap": self.skip_overlap,
            "files": [f.to_dict() for f in self.files],
            "unscored": list(self.unscored),
            "pooled": {k: v for k, v in self.pooled.to_dict().items() if k != "mapping"},
        }


def _union(regions: Iterable[tuple[float, float]]) -> np.ndarray:
    """Sorted, disjoint (n, 2) intervals covering ``regions`` (touching ones merged)."""
    merged: list[list[float]] = []
    for a, b in sorted((float(a), float(b)) for a, b in regions if b > a):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return np.asarray(merged, dtype=np.float64).reshape(-1, 2)


def _inside(points: np.ndarray, intervals: np.ndarray) -> np.ndarray:
    """(n,) bool: which points lie in one of the sorted disjoint ``intervals``."""
    if len(intervals) == 0:
        return np.zeros(len(points), dtype=bool)
    i = np.searchsorted(intervals[:, 0], points, side="right") - 1
    return (i >= 0) & (points < intervals[np.maximum(i, 0), 1])


def _activity(turns: list[SpeakerTurn], mids: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Speaker labels and their (n_speakers, n_stretches) activity at the stretch midpoints."""
    labels = sorted({t.speaker for t in turns})
    rows = [_inside(mids, _union((t.start, t.end) for t in turns if t.speaker == s)) for s in labels]
    return labels, np.asarray(rows, dtype=bool).reshape(len(labels), len(mids))


def score_file(
    reference: list[SpeakerTurn],
    hypothesis: list[SpeakerTurn],
    uem: Regions | None = None,
    *,
    collar: float = 0.0,
    skip_overlap: bool = False,
    file: str = "",
) -> DerComponents:
    """The DER components of one file (see the module docstring)."""
    from scipy.optimize import linear_sum_assignment

    if collar < 0:
        raise InputError("--collar must be >= 0")
    turns = [*reference, *hypothesis]
    if uem is None:
        uem = [(min(t.start for t in turns), max(t.end for t in turns))] if turns else []
    half = collar / 2
    collars = [(b - half, b + half) for t in reference for b in (t.start, t.end)] if collar > 0 else []
    edges = {b for t in turns for b in (t.start, t.end)}
    edges.update(b for region in (*uem, *collars) for b in region)
    edges = np.asarray(sorted(edges), dtype=np.float64)
    if len(edges) < 2:
        return DerComponents(file=file)
    mids, durations = (edges[:-1] + edges[1:]) / 2, np.diff(edges)
    ref_labels, ref = _activity(reference, mids)
    hyp_labels, hyp = _activity(hypothesis, mids)
    n_ref, n_hyp = ref.sum(axis=0), hyp.sum(axis=0)
    scored = _inside(mids, _union(uem)) & ~_inside(mids, _union(collars))
    if skip_overlap:
        scored &= n_ref < 2
    d = np.where(scored, durations, 0.0)
    shared = (hyp * d) @ ref.T.astype(np.float64)  # (n_hyp, n_ref) seconds both speak
    rows, cols = linear_sum_assignment(-shared) if shared.size else ([], [])
    mapping = {hyp_labels[h]: ref_labels[r] for h, r in zip(rows, cols) if shared[h, r] > 0}
    correct = float(sum(shared[h, r] for h, r in zip(rows, cols) if shared[h, r] > 0))
    return DerComponents(
        file=file,
        total=float(d @ n_ref),
        missed=float(d @ np.maximum(n_ref - n_hyp, 0)),
        false_alarm=float(d @ np.maximum(n_hyp - n_ref, 0)),
        confusion=float(d @ np.minimum(n_ref, n_hyp)) - correct,
        correct=correct,
        mapping=mapping,
    )


def diarization_error_rate(
    reference: Mapping[str, list[SpeakerTurn]],
    hypothesis: Mapping[str, list[SpeakerTurn]],
    uem: Mapping[str, Regions] | None = None,
    *,
    collar: float = 0.0,
    skip_overlap: bool = False,
) -> DerReport:
    """Per-file and pooled DER over the files of the reference (and of the UEM when given).

    A file with no hypothesis turns scores as all missed; hypothesis files in neither the
    reference nor the UEM are listed in ``unscored`` (a misnamed file id shows there).
    """
    files = list(dict.fromkeys([*reference, *(uem or {})]))
    if uem is not None:
        missing = [f for f in files if f not in uem]
        if missing:
            raise InputError(f"reference file id(s) not in the UEM: {', '.join(missing)}")
    return DerReport(
        files=tuple(
            score_file(
                reference.get(f, []),
                hypothesis.get(f, []),
                None if uem is None else uem[f],
                collar=collar,
                skip_overlap=skip_overlap,
                file=f,
            )
            for f in files
        ),
        collar=collar,
        skip_overlap=skip_overlap,
        unscored=tuple(sorted(set(hypothesis) - set(files))),
    )
