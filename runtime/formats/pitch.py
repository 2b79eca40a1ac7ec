"""PitchTrack writers: CSV (the original crepe command's columns) and JSON (the whole track).

CSV: ``time,frequency,confidence`` per frame as ``crepe`` writes it (times and Hz to 3 decimals,
confidence to 6). Frames that are not voiced (under the voicing threshold, or silent) have
frequency 0, the usual mark of an unvoiced frame; a voicing threshold of 0 and no silence gating
give crepe's own output. JSON: ``PitchTrack.to_dict()`` with its provenance, every frame's
decoded frequency and the voiced flags. Both are ``Format``s of the result type ``pitch``
(``registry.py``; the entry points of ``oasr.formats.pitch`` in pyproject).
"""

from __future__ import annotations

import json
import re

from ..results import PitchTrack
from . import registry
from .registry import Format

RESULT = "pitch"
_FLAT_LIST = re.compile(r"\[\s*((?:-?[0-9.eE+-]+|true|false)(?:,\s*(?:-?[0-9.eE+-]+|true|false))*)\s*\]")


def pitch_csv(track: PitchTrack) -> str:
    # Three decimals hold a whole-millisecond hop exactly; finer hops get microseconds.
    time_format = "{:.3f}" if abs(track.hop * 1000 - round(track.hop * 1000)) < 1e-9 else "{:.6f}"
    rows = ["time,frequency,confidence"]
    for t, f, c, v in zip(track.times, track.frequency, track.confidence, track.voiced):
        rows.append(f"{time_format.format(t)},{f if v else 0.0:.3f},{c:.6f}")
    return "\n".join(rows) + "\n"


def pitch_json(track: PitchTrack, indent: int | None = 2) -> str:
    """The track as JSON without a final newline; indented, the per-frame lists stay on one line each."""
    text = json.dumps(track.to_dict(), indent=indent, allow_nan=False)
    if indent is None:
        return text
    return _FLAT_LIST.sub(lambda m: "[" + ", ".join(p.strip() for p in m.group(1).split(",")) + "]", text)


def render_pitch(track: PitchTrack, fmt: str) -> str:
    return registry.get(RESULT, fmt).write(track)


def _write_json(track: PitchTrack) -> str:
    return pitch_json(track) + "\n"


# The entry points of oasr.formats.pitch (pyproject): csv first, the listing order of -F.
CSV = Format(pitch_csv, rank=10)
JSON = Format(_write_json, rank=20)
