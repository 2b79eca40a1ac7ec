"""Speaker-turn writers: rttm, json, csv. Each returns the whole file as a string.

    from oasr.formats.turns import render_turns
    text = render_turns(turns, "rttm")

Each is a ``Format`` of the result type ``turns`` (``registry.py``; the entry points of
``oasr.formats.turns`` in pyproject).
"""

from __future__ import annotations

import csv
import io
import json

from ..results import SpeakerTurns
from . import registry
from .registry import Format
from .rttm import write_rttm
from .text import _finite

RESULT = "turns"


def turns_json(turns: SpeakerTurns, indent: int | None = 2) -> str:
    """``SpeakerTurns.to_dict()`` as UTF-8 JSON text, without a final newline."""
    return json.dumps(_finite(turns.to_dict()), ensure_ascii=False, indent=indent, allow_nan=False)


def turns_csv(turns: SpeakerTurns, *, file_column: bool = False, header: bool = True) -> str:
    """``start,end,speaker`` with a header; times in seconds with 3 decimals.

    One CSV of several inputs: ``file_column`` puts the input first (``file,start,end,speaker``;
    the source as given, ``-`` for stdin), and ``header=False`` leaves the header line to the
    first input's rows, so the pieces concatenate into one valid CSV. A text cell a spreadsheet
    would run as a formula is written as text (``cell_text``).
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    lead = [cell_text(turns.source)] if file_column else []
    if header:
        writer.writerow(["file"] * file_column + ["start", "end", "speaker"])
    for t in turns.turns:
        writer.writerow(lead + [f"{t.start:.3f}", f"{t.end:.3f}", cell_text(t.speaker)])
    return out.getvalue()


FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet read a cell as a formula


def cell_text(text: str) -> str:
    """``text`` with a leading ``'`` when it would start a formula (a file named ``=cmd|...``),
    as OWASP advises for CSV; ``-`` alone (stdin) is left as it is."""
    return "'" + text if text.startswith(FORMULA_LEADS) and text != "-" else text


def render_turns(turns: SpeakerTurns, name: str) -> str:
    """``turns`` as the text of format ``name`` (rttm, json, csv or a plugin's)."""
    return registry.get(RESULT, name).write(turns)


def _write_json(turns: SpeakerTurns) -> str:
    return turns_json(turns) + "\n"


# The entry points of oasr.formats.turns (pyproject): rttm first, the listing order of -F.
RTTM = Format(write_rttm, rank=10)
JSON = Format(_write_json, rank=20)
CSV = Format(turns_csv, rank=30)
