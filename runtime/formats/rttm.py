"""RTTM (NIST Rich Transcription Time Marked) speaker turns and UEM scoring regions.

An RTTM ``SPEAKER`` line: ``SPEAKER <file> <channel> <start> <duration> <NA> <NA> <speaker> <NA> <NA>``.
A UEM line: ``<file> <channel> <start> <end>``. Fields are separated by any whitespace; ``;;``
starts a comment. Only ``SPEAKER`` lines of an RTTM are read (others, e.g. ``SPKR-INFO``, are
skipped). Readers take a path or the text itself and raise one InputError naming the line.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..errors import InputError
from ..results import SpeakerTurn, SpeakerTurns


# The record types of NIST's RTTM (rttm.txt of the RT evaluations); only SPEAKER is read.
RTTM_TYPES = frozenset(
    "SPEAKER SPKR-INFO SEGMENT NOSCORE NO_RT_METADATA LEXEME NON-LEX NON-SPEECH FILLER EDIT IP SU CB A/P".split()
)


def _text(source: str | Path, kind: str) -> tuple[str, str]:
    """(text, name for messages) of a path, or of text given directly (containing a newline)."""
    if isinstance(source, str) and "\n" in source:
        return source, f"<{kind} text>"
    path = Path(source)
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such {kind} file") from None
    except (OSError, ValueError) as e:  # ValueError: undecodable bytes, or a NUL in the path
        raise InputError(f"{path}: cannot read the {kind} file ({e})") from e


def _lines(text: str):
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split(";;", 1)[0].split()
        if fields:
            yield number, fields


def _number(value: str, name: str, where: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise InputError(f"{where}: {name} {value!r} is not a number") from None
    if not math.isfinite(x):
        raise InputError(f"{where}: {name} {value!r} is not a finite number")
    return x


def read_rttm(source: str | Path) -> dict[str, list[SpeakerTurn]]:
    """The ``SPEAKER`` turns of an RTTM file, by file id, each list sorted by start time.

    Turns of zero duration are dropped (they carry no speech); a negative start or duration is an
    InputError.
    """
    text, name = _text(source, "RTTM")
    files: dict[str, list[SpeakerTurn]] = {}
    for number, fields in _lines(text):
        if fields[0] not in RTTM_TYPES:
            # a file of something else (notes, a CSV) would score as no speech at all: DER 100%
            raise InputError(f"{name}:{number}: not an RTTM line (it starts {fields[0][:20]!r}; RTTM lines start SPEAKER, SPKR-INFO, ...)")
        if fields[0] != "SPEAKER":
            continue
        where = f"{name}:{number}"
        if len(fields) < 8:
            raise InputError(f"{where}: a SPEAKER line needs at least 8 fields, got {len(fields)}")
        start = _number(fields[3], "start", where)
        duration = _number(fields[4], "duration", where)
        if start < 0 or duration < 0:
            raise InputError(f"{where}: start and duration must not be negative")
        if not math.isfinite(start + duration):
            raise InputError(f"{where}: start + duration overflows")
        turns = files.setdefault(fields[1], [])
        if duration > 0:
            turns.append(SpeakerTurn(start, start + duration, fields[7]))
    for turns in files.values():
        turns.sort(key=lambda t: (t.start, t.end, t.speaker))
    return files


def read_uem(source: str | Path) -> dict[str, list[tuple[float, float]]]:
    """The scoring regions of a UEM file, by file id: sorted ``(start, end)`` pairs in seconds."""
    text, name = _text(source, "UEM")
    files: dict[str, list[tuple[float, float]]] = {}
    for number, fields in _lines(text):
        where = f"{name}:{number}"
        if len(fields) != 4:
            raise InputError(f"{where}: a UEM line has 4 fields (file channel start end), got {len(fields)}")
        start, end = _number(fields[2], "start", where), _number(fields[3], "end", where)
        if start < 0 or end < start:
            raise InputError(f"{where}: a region needs 0 <= start <= end, got {start} {end}")
        files.setdefault(fields[0], []).append((start, end))
    for regions in files.values():
        regions.sort()
    return files


def file_id(source: str) -> str:
    """The RTTM file id of an input: its base name without the extension ("stdin" for "-")."""
    if source in ("", "-"):
        return "stdin"
    return Path(source).stem or "audio"


def rttm_lines(turns: SpeakerTurns, uri: str | None = None) -> list[str]:
    """One ``SPEAKER`` line per turn; times with 3 decimals, whitespace in names made ``_``."""
    uri = "_".join((uri or file_id(turns.source)).split())
    lines = []
    for t in turns.turns:
        speaker = "_".join(t.speaker.split()) or "speaker"
        lines.append(f"SPEAKER {uri} 1 {t.start:.3f} {t.end - t.start:.3f} <NA> <NA> {speaker} <NA> <NA>")
    return lines


def write_rttm(turns: SpeakerTurns, uri: str | None = None) -> str:
    """RTTM text of ``turns`` ("" when there are none): the file id is ``uri``, else the source's."""
    return "".join(line + "\n" for line in rttm_lines(turns, uri))
