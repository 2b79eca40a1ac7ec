"""An energy voice-activity detector, and the map from speech-only audio back to the original.

The detector needs no model: frame RMS in dB against a threshold that adapts to the recording's
noise floor (a low percentile of the frame levels), with hysteresis, a minimum speech and
silence duration, and padding. It is meant to skip long silences and steady noise before
decoding, not to find speech in music or babble (the diarize work brings a neural VAD).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from ...errors import InputError
from ...io.samples import as_samples


@dataclass(frozen=True)
class EnergyVadOptions:
    frame_seconds: float = 0.02  # analysis frame (and hop)
    noise_percentile: float = 10.0  # the noise floor: this percentile of the frame levels
    margin_db: float = 12.0  # a region must rise this far above the noise floor...
    hold_db: float = 6.0  # ...and lasts while it stays this far above it (hysteresis)
    floor_db: float = -60.0  # dBFS: frames quieter than this are never speech
    min_speech_seconds: float = 0.25  # shorter bursts (clicks) are dropped
    min_silence_seconds: float = 0.5  # shorter pauses stay inside the speech around them
    pad_seconds: float = 0.2  # kept on each side of every region


LEVEL_BLOCK = 1 << 20  # samples squared at once: the levels of a long file need no copy of it


def frame_levels_db(audio: np.ndarray, frame: int) -> np.ndarray:
    """RMS of consecutive ``frame``-sample frames in dBFS (the last partial frame included,
    zero-padded), computed a block of frames at a time."""
    audio = as_samples(audio)  # a SampleFile stays on disk: blocks are read from it below
    if audio.size == 0:
        return np.zeros(0, dtype=np.float32)
    n = -(-audio.size // frame)
    power = np.empty(n, dtype=np.float32)
    step = max(1, LEVEL_BLOCK // frame)
    for first in range(0, n, step):
        block = audio[first * frame : (first + step) * frame]
        pad = (-block.size) % frame
        if pad:
            block = np.pad(block, (0, pad))
        power[first : first + step] = np.square(block.reshape(-1, frame), dtype=np.float32).mean(axis=1)
    return 10.0 * np.log10(power + 1e-12)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) index ranges where ``mask`` is True."""
    edges = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    return list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist()))


def speech_regions(
    audio: np.ndarray, sample_rate: int, options: EnergyVadOptions = EnergyVadOptions()
) -> list[tuple[int, int]]:
    """Speech as sorted, disjoint ``(start, end)`` sample ranges of ``audio`` (mono)."""
    frame = max(1, round(options.frame_seconds * sample_rate))
    levels = frame_levels_db(audio, frame)
    if levels.size == 0:
        return []
    noise = float(np.percentile(levels, options.noise_percentile))
    high = max(noise + options.margin_db, options.floor_db)
    low = max(noise + options.hold_db, options.floor_db)
    # A region is a run above the low threshold that reaches the high one somewhere.
    regions = [(a, b) for a, b in _runs(levels > low) if levels[a:b].max() > high]
    # Bridge short pauses, then drop short bursts.
    min_gap = options.min_silence_seconds / options.frame_seconds
    merged: list[list[int]] = []
    for a, b in regions:
        if merged and a - merged[-1][1] < min_gap:
            merged[-1][1] = b
        else:
            merged.append([a, b])
    min_len = options.min_speech_seconds / options.frame_seconds
    pad = round(options.pad_seconds * sample_rate)
    out: list[tuple[int, int]] = []
    for a, b in merged:
        if b - a < min_len:
            continue
        start, end = max(0, a * frame - pad), min(len(audio), b * frame + pad)
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


class SpeechMap:
    """Times in the concatenation of speech regions -> times in the original audio."""

    def __init__(self, regions: list[tuple[int, int]], sample_rate: int):
        if not regions:
            raise InputError("no speech regions to map")
        self.sample_rate = sample_rate
        self.original = [a / sample_rate for a, _ in regions]  # region starts in the original
        self.joined: list[float] = []  # region starts in the concatenation
        self.lengths = [(b - a) / sample_rate for a, b in regions]
        position = 0.0
        for length in self.lengths:
            self.joined.append(position)
            position += length
        self.duration = position

    def region(self, t: float, is_end: bool = False) -> int:
        """The region holding time ``t`` of the concatenation (an end at a seam: the earlier)."""
        i = max(0, bisect.bisect_right(self.joined, t) - 1)
        if is_end and i > 0 and t <= self.joined[i]:
            i -= 1
        return i

    def to_original(self, t: float, is_end: bool = False, region: int | None = None) -> float:
        i = self.region(t, is_end) if region is None else region
        inside = min(max(t - self.joined[i], 0.0), self.lengths[i])
        return self.original[i] + inside


def collect_speech(
    audio: np.ndarray, regions: list[tuple[int, int]], sample_rate: int
) -> tuple[np.ndarray, SpeechMap | None]:
    """The speech regions of ``audio`` joined end to end, and their map (None when no speech)."""
    if not regions:
        return np.zeros(0, dtype=np.float32), None
    joined = np.concatenate([audio[a:b] for a, b in regions]).astype(np.float32, copy=False)
    return joined, SpeechMap(regions, sample_rate)
