"""Line-per-segment formats: txt, tsv (openai-whisper's), lrc, and the JSON schema."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ..results import Transcript
from . import WriterOptions
from .registry import Format
from .common import milliseconds, one_line, segment_speaker, speaker_prefix


def _lines(transcript: Transcript):
    """(segment, its text on one line with the speaker prefix) for each segment with text."""
    for segment in transcript.segments:
        text = one_line(segment.text)
        if text:
            yield segment, speaker_prefix(segment_speaker(segment)) + text


def _joined(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def write_txt(transcript: Transcript, options: WriterOptions = WriterOptions()) -> str:
    """One segment per line, ``[SPEAKER] `` first when the segment has one; "" for no speech."""
    return _joined([text for _, text in _lines(transcript)])


def write_tsv(transcript: Transcript, options: WriterOptions = WriterOptions()) -> str:
    """openai-whisper's TSV: a ``start end text`` header, then times in integer milliseconds."""
    rows = ["start\tend\ttext"]
    for segment, text in _lines(transcript):
        rows.append(f"{milliseconds(segment.start)}\t{milliseconds(segment.end)}\t{text}")
    return _joined(rows)


def write_lrc(transcript: Transcript, options: WriterOptions = WriterOptions()) -> str:
    """LRC lyrics: ``[mm:ss.xx]text`` per segment (minutes grow past 99 on long audio)."""
    rows = []
    for segment, text in _lines(transcript):
        cs = (milliseconds(segment.start) + 5) // 10  # centiseconds, rounded
        minutes, cs = divmod(cs, 6000)
        rows.append(f"[{minutes:02d}:{cs // 100:02d}.{cs % 100:02d}]{text}")
    return _joined(rows)


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: such floats become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


_NUMBER_LIST = re.compile(r"\[\s+([-+\d.eE,\s]+?)\s+\]")


def transcript_json(transcript: Transcript, indent: int | None = 2) -> str:
    """``Transcript.to_dict()`` as UTF-8 JSON text (no ``\\u`` escapes), without a final newline.

    Indented, lists of numbers (token ids) stay on one line; ``indent=None``: one compact line.
    """
    text = json.dumps(_finite(transcript.to_dict()), ensure_ascii=False, indent=indent, allow_nan=False)
    if indent is None:
        return text
    return _NUMBER_LIST.sub(lambda m: "[" + " ".join(m.group(1).split()) + "]", text)


def write_json(transcript: Transcript, options: WriterOptions = WriterOptions()) -> str:
    """openai-whisper's schema (text, segments, language) plus duration, source and provenance."""
    return transcript_json(transcript) + "\n"


# The entry points of oasr.formats.transcript (pyproject): txt first, the listing order of -F.
TXT = Format(write_txt, rank=10)
JSON = Format(write_json, rank=40)
TSV = Format(write_tsv, rank=50)
LRC = Format(write_lrc, rank=60)
