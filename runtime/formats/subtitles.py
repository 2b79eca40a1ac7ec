"""SubRip (srt) and WebVTT (vtt): cues cut from segments, or from words when they have times.

Cutting follows openai-whisper's ``SubtitlesWriter.iterate_result``:

- with word timestamps, lines are filled word by word up to ``max_line_width`` characters; a cue
  ends after ``max_line_count`` lines or before a pause of more than 3 s; without both limits each
  segment stays one cue (wrapped at the width when only the width is given);
- without word timestamps, a segment's text is wrapped at ``max_line_width`` and, when it needs
  more than ``max_line_count`` lines, split into several cues whose times are interpolated by
  their share of the characters.

oasr adds speakers (a cue never mixes two; SRT shows ``[SPEAKER] ``, WebVTT a ``<v SPEAKER>`` voice
span), escaping (no ``-->`` in SRT text; ``&``, ``<``, ``>`` as entities in WebVTT), cues sorted by
start time with their end after their start, and no empty cues.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterator

from ..errors import InputError
from ..results import Segment, Transcript
from . import WriterOptions
from .registry import Format
from .common import clock, milliseconds, one_line, segment_speaker, speaker_prefix

LONG_PAUSE = 3.0  # seconds between words that start a new cue (when cutting by lines)


@dataclass
class Cue:
    start: float
    end: float
    lines: list[list[str]] = field(default_factory=list)  # words per line; a line's first word is stripped
    speaker: str | None = None
    highlight: int | None = None  # index of the word to underline, counting over all lines
    word_times: list[tuple[float, float]] | None = None  # (start, end) per word, when cut from words

    def text(self, escape: Callable[[str], str] = lambda s: s) -> str:
        out, index = [], 0
        for line in self.lines:
            parts = []
            for word in line:
                word = escape(word)
                if index == self.highlight:
                    word = re.sub(r"^(\s*)(.*)$", r"\1<u>\2</u>", word, flags=re.S)
                parts.append(word)
                index += 1
            text = "".join(parts).strip()
            if text:
                out.append(text)
        return "\n".join(out)


def iterate_cues(
    transcript: Transcript,
    options: WriterOptions = WriterOptions(),
    speaker_width: Callable[[str | None], int] = lambda speaker: 0,
) -> Iterator[Cue]:
    """The cues of ``transcript`` in start-time order (highlighted copies when asked).

    ``speaker_width(speaker)``: characters the writer puts before a cue's first line for its
    speaker; they count against ``max_line_width``.
    """
    segments = transcript.segments
    with_words = bool(segments) and all(s.words is not None for s in segments)
    if options.highlight_words and segments and not with_words:
        raise InputError("highlighted words need word timestamps (--word-timestamps)")
    if with_words:
        cues = list(_word_cues(segments, options, speaker_width))
    else:
        cues = list(_segment_cues(segments, options, speaker_width))
    cues = [c for c in cues if c.text()]
    cues.sort(key=lambda c: c.start)  # stable: equal starts keep their order
    for cue in cues:
        if options.highlight_words:
            yield from _highlighted(cue)
        else:
            yield cue


def _word_cues(segments: tuple[Segment, ...], options: WriterOptions, speaker_width) -> Iterator[Cue]:
    width, count = options.max_line_width, options.max_line_count
    preserve_segments = width is None or count is None
    per_cue = options.max_words_per_line if width is None else None
    width = width or 10**9
    first = next((w.start for s in segments for w in s.words or ()), 0.0)
    cue: list[tuple[str, float, float, bool]] = []  # (word, start, end, starts a new line)
    cue_speaker: str | None = None
    line_len, line_count, last = 0, 1, first

    def emit() -> Cue:
        lines: list[list[str]] = []
        for word, _, _, newline in cue:
            if newline or not lines:
                lines.append([])
            lines[-1].append(word)
        times = [(start, end) for _, start, end, _ in cue]
        return Cue(cue[0][1], max(end for _, end in times), lines, cue_speaker, word_times=times)

    for segment in segments:
        for i, w in enumerate(segment.words or ()):
            word = w.word.replace("\n", " ")
            speaker = w.speaker or segment.speaker
            long_pause = not preserve_segments and w.start - last > LONG_PAUSE
            has_room = line_len + len(word) <= width
            seg_break = bool(cue) and preserve_segments and (i == 0 or (per_cue is not None and len(cue) >= per_cue))
            speaker_break = bool(cue) and speaker != cue_speaker
            newline = False
            if line_len > 0 and has_room and not (long_pause or seg_break or speaker_break):
                line_len += len(word)  # the line goes on
            else:
                word = word.strip()
                if cue and ((count is not None and (long_pause or line_count >= count)) or seg_break or speaker_break):
                    yield emit()  # a new cue
                    cue, line_count = [], 1
                elif line_len > 0:
                    line_count += 1  # a new line in this cue
                    newline = True
                line_len = len(word)
            if not cue:
                cue_speaker = speaker
                line_len += speaker_width(speaker)
            cue.append((word, w.start, w.end, newline))
            last = w.start
    if cue:
        yield emit()


def _wrap(text: str, width: int, indent: int, count: int | None) -> list[str]:
    """Greedy lines of at most ``width`` characters; the first line of each cue (every ``count``
    lines) ``indent`` characters shorter; a word longer than a line is cut."""
    lines: list[str] = []
    line = ""

    def limit() -> int:
        first = len(lines) % count == 0 if count else not lines
        return max(1, width - indent) if first else width

    for word in text.split():
        while word:
            if line and len(line) + 1 + len(word) <= limit():
                line, word = f"{line} {word}", ""
            elif line:
                lines.append(line)
                line = ""
            elif len(word) <= limit():
                line, word = word, ""
            else:
                cut = limit()
                lines.append(word[:cut])
                word = word[cut:]
    if line:
        lines.append(line)
    return lines


def _segment_cues(segments: tuple[Segment, ...], options: WriterOptions, speaker_width) -> Iterator[Cue]:
    width, count = options.max_line_width, options.max_line_count
    for segment in segments:
        text = one_line(segment.text)
        if not text:
            continue
        speaker = segment_speaker(segment)
        lines = _wrap(text, width, speaker_width(speaker), count) if width else [text]
        groups = [lines[i : i + count] for i in range(0, len(lines), count)] if count else [lines]
        total = sum(len(line) for line in lines)
        start, end = segment.start, max(segment.end, segment.start)
        done = 0
        for group in groups:
            chars = sum(len(line) for line in group)
            t0 = start + (end - start) * done / total
            done += chars
            t1 = start + (end - start) * done / total
            yield Cue(t0, t1, [[line] for line in group], speaker)


def _highlighted(cue: Cue) -> Iterator[Cue]:
    """openai-whisper's --highlight_words: the cue once per word, that word underlined (<u>)."""
    last = cue.start
    for i, (start, end) in enumerate(cue.word_times or ()):
        if milliseconds(start) > milliseconds(last):  # a gap before the word: the plain cue
            yield Cue(last, start, cue.lines, cue.speaker)
        yield Cue(start, end, cue.lines, cue.speaker, highlight=i)
        last = end


def _timing(cue: Cue) -> tuple[int, int]:
    start = milliseconds(cue.start)
    end = max(milliseconds(cue.end), start + 1)  # both specs want the end after the start
    return start, end


def write_srt(transcript: Transcript, options: WriterOptions = WriterOptions()) -> str:
    """SubRip: index, ``HH:MM:SS,mmm --> HH:MM:SS,mmm``, text lines, a blank line; ``[SPEAKER] `` first."""
    blocks = []
    cues = iterate_cues(transcript, options, lambda speaker: len(speaker_prefix(speaker)))
    for index, cue in enumerate(cues, start=1):
        start, end = _timing(cue)
        text = speaker_prefix(cue.speaker) + cue.text(lambda s: s.replace("-->", "->"))
        blocks.append(f"{index}\n{clock(start, ',')} --> {clock(end, ',')}\n{text}\n")
    return "\n".join(blocks)


def _vtt_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_vtt(transcript: Transcript, options: WriterOptions = WriterOptions()) -> str:
    """WebVTT: a ``WEBVTT`` header, then ``HH:MM:SS.mmm --> HH:MM:SS.mmm`` cues; ``<v SPEAKER>`` voices."""
    blocks = ["WEBVTT\n"]
    for cue in iterate_cues(transcript, options):
        start, end = _timing(cue)
        text = cue.text(_vtt_escape)
        if cue.speaker:
            text = f"<v {_vtt_escape(one_line(cue.speaker))}>{text}"
        blocks.append(f"{clock(start)} --> {clock(end)}\n{text}\n")
    return "\n".join(blocks)


# The entry points of oasr.formats.transcript (pyproject).
SRT = Format(write_srt, rank=20)
VTT = Format(write_vtt, rank=30)
