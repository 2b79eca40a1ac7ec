"""Transcript writers: txt, srt, vtt, json, tsv, lrc. Each returns the whole file as a string.

    from oasr.formats import get_writer, WriterOptions
    text = get_writer("srt")(transcript, WriterOptions(max_line_width=42, max_line_count=2))

A writer is ``(Transcript, WriterOptions) -> str``, registered under a format name with
``@register_writer("name", "ext")``; ``FORMATS`` lists the built-in names in a stable order.
Writers never touch the file system: the caller decides where the text goes (stdout, an atomic
file write).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import InputError
from ..options import check_range
from ..results import Transcript

FORMATS = ("txt", "srt", "vtt", "json", "tsv", "lrc")
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

    def __post_init__(self):
        if self.max_line_width is not None:
            check_range(self.max_line_width, "--max-line-width", 1, MAX_LINE_WIDTH, integer=True)
        if self.max_line_count is not None:
            check_range(self.max_line_count, "--max-line-count", 1, MAX_LINE_COUNT, integer=True)
        if self.max_line_count is not None and self.max_line_width is None:
            raise InputError("--max-line-count needs --max-line-width (lines are cut at that width)")


Writer = Callable[[Transcript, WriterOptions], str]


@dataclass(frozen=True)
class WriterEntry:
    name: str
    extension: str
    write: Writer


_WRITERS: dict[str, WriterEntry] = {}


def register_writer(name: str, extension: str | None = None) -> Callable[[Writer], Writer]:
    """Decorator: register ``fn(transcript, options) -> str`` as the writer of format ``name``."""

    def wrap(fn: Writer) -> Writer:
        if name in _WRITERS and _WRITERS[name].write is not fn:
            raise ValueError(f"a writer for format {name!r} is already registered")
        _WRITERS[name] = WriterEntry(name, extension or name, fn)
        return fn

    return wrap


def _load_builtins() -> None:
    from . import subtitles, text  # noqa: F401  (registration happens on import)


def writers() -> dict[str, WriterEntry]:
    """Every registered format, by name: the built-ins in ``FORMATS`` order, then the others."""
    _load_builtins()
    order = {name: i for i, name in enumerate(FORMATS)}
    return dict(sorted(_WRITERS.items(), key=lambda item: order.get(item[0], len(order))))


def get_writer(name: str) -> Writer:
    """The writer of format ``name``; an InputError listing the formats when it is unknown."""
    entry = writers().get(name)
    if entry is None:
        raise InputError(f"unknown output format {name!r}; choose {', '.join(writers())}")
    return entry.write


def extension(name: str) -> str:
    """The file extension (without the dot) of format ``name``."""
    get_writer(name)
    return _WRITERS[name].extension


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


__all__ = [
    "FORMATS",
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
