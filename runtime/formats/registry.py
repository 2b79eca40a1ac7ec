"""The output formats of every task, by result type and name: what ``-F`` offers.

A result type (``transcript``, ``turns``, ``pitch``, ``stems``, ``speech``) has the entry-point
group ``oasr.formats.<result>``: each entry names a format and points at its ``Format`` (the
writer, the file extension, where it comes in listings). The built-ins are declared in pyproject
exactly as a plugin declares its own, so a new format is one writer and one line, and every
command offers it. What a writer is depends on its result type:

- transcript: ``fn(Transcript, WriterOptions) -> str``;
- turns, pitch: ``fn(SpeakerTurns) -> str``, ``fn(PitchTrack) -> str``;
- stems: the soundfile container name the stems are encoded in ("WAV", "FLAC");
- speech: ``fn(binary file, sample_rate, tags) -> PcmWriter``, the streamed audio writer.

``register`` adds a format for this process only (the Python API; tests). Listing the formats
imports their modules, which import no torch: ``oasr --help`` builds its choices from here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from .. import plugins
from ..errors import CapabilityError, InputError

log = logging.getLogger("oasr")

DEFAULT_RANK = 100  # plugins come after the built-ins unless they say otherwise


@dataclass(frozen=True)
class Format:
    """What an entry point of ``oasr.formats.<result>`` points at."""

    write: Any  # the result type's writer (see the module docstring)
    extension: str = ""  # the file extension without the dot; "" means the format's name
    rank: int = DEFAULT_RANK  # listing order among its result's formats (-F all, --help, errors); ties by name


@dataclass(frozen=True)
class WriterEntry:
    """A format under its name."""

    name: str
    extension: str
    write: Any
    rank: int = DEFAULT_RANK


_REGISTERED: dict[str, dict[str, WriterEntry]] = {}  # result type -> name -> entry, this process only


def group(result: str) -> str:
    return f"oasr.formats.{result}"


def registered(result: str) -> dict[str, WriterEntry]:
    """The formats of ``result`` registered in this process (a dict ``register`` fills)."""
    return _REGISTERED.setdefault(result, {})


def register(result: str, name: str, write: Any, extension: str | None = None, rank: int = DEFAULT_RANK) -> None:
    """Add the format ``name`` of ``result`` for this process."""
    mine = registered(result)
    if name in mine and mine[name].write is not write:
        raise ValueError(f"a writer for format {name!r} is already registered")
    mine[name] = WriterEntry(name, extension or name, write, rank)


def _declared(result: str) -> dict[str, WriterEntry]:
    """The formats installed packages declare; one that fails to import is left out with a warning
    (a broken plugin must not take the built-ins, or ``--help``, down with it)."""
    out = {}
    for name in plugins.declared(group(result)):
        try:
            fmt = plugins.load(group(result), name, f"{result} format")
        except CapabilityError as e:
            log.warning("%s", e)
            continue
        if not isinstance(fmt, Format):
            log.warning("the %s format %r is not an oasr.formats.Format; left out", result, name)
            continue
        out[name] = WriterEntry(name, fmt.extension or name, fmt.write, fmt.rank)
    return out


def formats(result: str) -> dict[str, WriterEntry]:
    """Every format of ``result``, by name, in listing order (rank, then name)."""
    found = {**_declared(result), **registered(result)}
    return dict(sorted(found.items(), key=lambda item: (item[1].rank, item[0])))


def names(result: str) -> list[str]:
    """The format names of ``result`` in listing order: the choices of a command's ``-F``."""
    return list(formats(result))


def get(result: str, name: str) -> WriterEntry:
    """The format ``name`` of ``result``; an InputError listing the formats when it is unknown."""
    entry = formats(result).get(name)
    if entry is None:
        if not names(result):  # even the built-ins are missing: the package's metadata is stale
            raise InputError(f"no {result} formats are installed: reinstall oasr-toolchain (its entry points are missing)")
        raise InputError(f"unknown output format {name!r}; choose {', '.join(names(result))}")
    return entry


def extensions(result: str) -> dict[str, str]:
    """``{format name: file extension}`` of ``result``: what ``-o FILE`` and ``--output-dir`` go by."""
    return {name: entry.extension for name, entry in formats(result).items()}


__all__ = ["Format", "WriterEntry", "register", "registered", "formats", "names", "get", "extensions", "group"]
