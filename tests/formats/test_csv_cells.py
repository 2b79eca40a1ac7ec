"""CSV cells a spreadsheet would run as formulas are written as text (issue 31)."""

from __future__ import annotations

import csv
import io

import pytest

from oasr.formats.turns import turns_csv
from oasr.results import SpeakerTurn, SpeakerTurns


def rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


@pytest.mark.parametrize("name", ["=cmd|' /C calc'!A0.wav", "+1.wav", "-2+3.wav", "@SUM(A1).wav", "\tx.wav"])
def test_formula_file_names_are_text(name):
    turns = SpeakerTurns((SpeakerTurn(0.0, 1.0, "SPEAKER_00"),), 1.0, source=name)
    (header, row) = rows(turns_csv(turns, file_column=True))
    assert header == ["file", "start", "end", "speaker"]
    assert row == ["'" + name, "0.000", "1.000", "SPEAKER_00"]


def test_plain_names_and_stdin_kept():
    for name in ("talk.wav", "-", "a=b.wav", "dir/-x.wav"):
        turns = SpeakerTurns((SpeakerTurn(0.5, 1.25, "=A1"),), 2.0, source=name)
        (_, row) = rows(turns_csv(turns, file_column=True))
        assert row == [name, "0.500", "1.250", "'=A1"]
