"""Speaker-turn writers: rttm, json, csv. Each returns the whole file as a string.

    from oasr.formats.turns import render_turns
    text = render_turns(turns, "rttm")
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from ..errors import InputError
from ..results import SpeakerTurns
from .rttm import write_rttm
from .text import _finite

TURN_FORMATS = ("rttm", "json", "csv")


def turns_json(turns: SpeakerTurns, indent: int | None = 2) -> str:
    """``SpeakerTurns.to_dict()`` as UTF-8 JSON text, without a final newline."""
    return json.dumps(_finite(turns.to_dict()), ensure_ascii=False, indent=indent, allow_nan=False)


def turns_csv(turns: SpeakerTurns, *, file_column: bool = False, header: bool = True) -> str:
    """``start,end,speaker`` with a header; times in seconds with 3 decimals.

    One CSV of several inputs: ``file_column`` puts the input first (``file,start,end,speaker``;
    the source as given, ``-`` for stdin), and ``header=False`` leaves the header line to the
    first input's rows, so the pieces concatenate into one valid CSV.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    lead = [turns.source] if file_column else []
    if header:
        writer.writerow(["file"] * file_column + ["start", "end", "speaker"])
    for t in turns.turns:
        writer.writerow(lead + [f"{t.start:.3f}", f"{t.end:.3f}", t.speaker])
    return out.getvalue()


def render_turns(turns: SpeakerTurns, name: str) -> str:
    """``turns`` as the text of format ``name`` (rttm, json or csv)."""
    if name == "rttm":
        return write_rttm(turns)
    if name == "json":
        return turns_json(turns) + "\n"
    if name == "csv":
        return turns_csv(turns)
    raise InputError(f"unknown output format {name!r}; choose {', '.join(TURN_FORMATS)}")


def turn_format_from_suffix(path: str | Path) -> str | None:
    """The format a file name asks for by its extension (``out.RTTM`` -> ``rttm``), or None."""
    suffix = Path(str(path)).suffix.lower().lstrip(".")
    return suffix if suffix in TURN_FORMATS else None
