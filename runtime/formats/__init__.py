"""Transcript writers: txt, srt, vtt, json, tsv, lrc. Each returns the whole file as a string.

    from oasr.formats import get_writer, WriterOptions
    text = get_writer("srt")(transcript, WriterOptions(max_line_width=42, max_line_count=2))

A writer is ``(Transcript, WriterOptions) -> str``, a ``Format`` of the result type
``transcript`` in the registry of every task's formats (``registry.py``: the entry-point group
``oasr.formats.transcript``; ``register_writer`` adds one for this process). ``FORMATS`` lists
the installed names in their listing order. Writers never touch the file system: the caller
decides where the text goes (stdout, an atomic file write).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import InputError
from ..options import check_range
from ..results import Transcript
from . import registry
from .registry import Format, WriterEntry

RESULT = "transcript"
SUBTITLE_FORMATS = ("srt", "vtt")  # the formats --max-line-width / --max-line-count apply to


# Subtitle layout bounds: a line wider than 1000 characters or a cue of more than 100 lines is no
# subtitle any player shows; the cut itself is linear in the text.
MAX_LINE_WIDTH = 1000
MAX_LINE_COUNT = 100


@dataclass(frozen=True)
class WriterOptions:
    max_line_width: int | None = None  # characters per subtitle line; None: one line per cue text
    max_line_count: int | None = None  # lines per subtitle cue (needs max_line_width); None: no limit
    highlight_words: bool = False  # srt/vtt: one cue per word with the spoken word underlined (<u>)
    # srt/vtt with word times: at most N words per cue, segments kept apart (openai-whisper's
    # --max_words_per_line; no effect with max_line_width, as there)
    max_words_per_line: int | None = None

    def __post_init__(self):
        if self.max_line_width is not None:
            check_range(self.max_line_width, "--max-line-width", 1, MAX_LINE_WIDTH, integer=True)
        if self.max_line_count is not None:
            check_range(self.max_line_count, "--max-line-count", 1, MAX_LINE_COUNT, integer=True)
        if self.max_words_per_line is not None:
            check_range(self.max_words_per_line, "--max-words-per-line", 1, MAX_LINE_WIDTH, integer=True)
        if self.max_line_count is not None and self.max_line_width is None:
            raise InputError("--max-line-count needs --max-line-width (lines are cut at that width)")


Writer = Callable[[Transcript, WriterOptions], str]


_WRITERS = registry.registered(RESULT)  # register_writer's formats (this process only)


def register_writer(name: str, extension: str | None = None) -> Callable[[Writer], Writer]:
    """Decorator: register ``fn(transcript, options) -> str`` as the writer of format ``name``
    for this process (a package declares its formats as entry points instead)."""

    def wrap(fn: Writer) -> Writer:
        registry.register(RESULT, name, fn, extension)
        return fn

    return wrap


def writers() -> dict[str, WriterEntry]:
    """Every transcript format, by name, in listing order (the built-ins first)."""
    return registry.formats(RESULT)


def get_writer(name: str) -> Writer:
    """The writer of format ``name``; an InputError listing the formats when it is unknown."""
    return registry.get(RESULT, name).write


def extension(name: str) -> str:
    """The file extension (without the dot) of format ``name``."""
    return registry.get(RESULT, name).extension


def format_from_suffix(path: str | Path) -> str | None:
    """The format a file name asks for by its extension (``talk.SRT`` -> ``srt``), or None."""
    suffix = Path(str(path)).suffix.lower().lstrip(".")
    if not suffix:
        return None
    for entry in writers().values():
        if entry.extension == suffix:
            return entry.name
    return None


def render(transcript: Transcript, name: str, options: WriterOptions | None = None) -> str:
    """``transcript`` as the text of format ``name``."""
    return get_writer(name)(transcript, options or WriterOptions())


def __getattr__(name: str):
    if name == "FORMATS":  # read from the registry when asked: the writers' modules import this one
        return tuple(registry.names(RESULT))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FORMATS",
    "Format",
    "SUBTITLE_FORMATS",
    "WriterOptions",
    "WriterEntry",
    "register_writer",
    "writers",
    "get_writer",
    "extension",
    "format_from_suffix",
    "render",
]
