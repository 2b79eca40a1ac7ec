"""Helpers the writers share: timestamps from integer milliseconds, speakers, text cleaning."""

from __future__ import annotations

import math

from ..results import Segment


def milliseconds(seconds: float) -> int:
    """Whole milliseconds, never negative (NaN counts as 0)."""
    if not math.isfinite(seconds) or seconds <= 0:
        return 0
    return int(round(seconds * 1000.0))


def clock(ms: int, decimal_marker: str = ".", digits: int = 3) -> str:
    """``HH:MM:SS<marker>mmm`` (hours grow past two digits when needed); digits 3 or 2."""
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    seconds, ms = divmod(ms, 1000)
    fraction = f"{ms:03d}" if digits == 3 else f"{ms // 10:02d}"
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}{decimal_marker}{fraction}"


def one_line(text: str) -> str:
    """Text with every run of whitespace (tabs, newlines) made one space, stripped."""
    return " ".join(text.split())


def segment_speaker(segment: Segment) -> str | None:
    """The segment's speaker, else the one speaker all its words share, else None."""
    if segment.speaker:
        return segment.speaker
    speakers = {w.speaker for w in segment.words or () if w.speaker}
    return speakers.pop() if len(speakers) == 1 else None


def speaker_prefix(speaker: str | None) -> str:
    return f"[{one_line(speaker)}] " if speaker else ""
