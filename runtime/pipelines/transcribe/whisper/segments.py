"""A window's tokens -> pieces (openai's segmentation), and pieces -> segments on the recording's clock."""

from __future__ import annotations

import dataclasses
import re

from ....results import Segment, Word
from .decoder import WindowDecoder
from .window import Geometry, Piece


def split(decoder: WindowDecoder, tokens: tuple[int, ...], seek: int, size: int) -> tuple[list[Piece], int, bool]:
    """openai's segmentation: pieces between consecutive timestamp pairs; the next seek; whether
    the tokens end with a single timestamp (no speech after it)."""
    g: Geometry = decoder.geometry
    tb = decoder.tokenizer.timestamp_begin
    time_offset = g.seconds(seek)
    is_ts = [t >= tb for t in tokens]
    single_ending = len(tokens) >= 2 and not is_ts[-2] and is_ts[-1]
    cuts = [i for i in range(1, len(tokens)) if is_ts[i] and is_ts[i - 1]]
    pieces: list[Piece] = []
    if cuts:
        if single_ending:
            cuts.append(len(tokens))
        begin = 0
        for cut in cuts:
            part = list(tokens[begin:cut])
            start = time_offset + (part[0] - tb) * g.time_precision
            end = time_offset + (part[-1] - tb) * g.time_precision
            pieces.append(_piece(decoder.tokenizer, start, end, part))
            begin = cut
        if single_ending:  # no speech after the last timestamp
            seek += size
        else:  # the last segment is unfinished: the next window starts where it begins
            seek += (tokens[begin - 1] - tb) * g.input_stride
    else:
        duration = g.seconds(size)
        stamps = [t for t in tokens if t >= tb]
        if stamps and stamps[-1] != tb:  # a lone timestamp: where the text ends
            duration = (stamps[-1] - tb) * g.time_precision
        pieces.append(_piece(decoder.tokenizer, time_offset, time_offset + duration, list(tokens)))
        seek += size
    return pieces, seek, single_ending


def split_whole(decoder: WindowDecoder, tokens: tuple[int, ...], seek: int, size: int) -> list[Piece]:
    """``split``, plus the unfinished last segment (for a window no later one starts inside, as
    in the batched loop): that one ends with the window's audio."""
    g: Geometry = decoder.geometry
    pieces, _, single_ending = split(decoder, tokens, seek, size)
    used = sum(len(p.tokens) for p in pieces)
    tail = list(tokens[used:])
    tb = decoder.tokenizer.timestamp_begin
    if tail and not single_ending and any(t < tb for t in tail):
        start = g.seconds(seek) + (tail[0] - tb) * g.time_precision if tail[0] >= tb else pieces[-1].end
        pieces.append(_piece(decoder.tokenizer, start, g.seconds(seek + size), tail))
    return pieces


def _piece(tokenizer, start: float, end: float, tokens: list[int]) -> Piece:
    return Piece(start, end, tokens, tokenizer.decode(tokens))


_PUNCTUATION = re.compile(r"[^\w\s]")


class Repeats:
    """Whisper's looping: a segment repeating the previous kept one is dropped when it comes from an
    earlier window, or has three words or more (a short "Hello? Hello?" inside one window stays)."""

    def __init__(self):
        self.last: tuple[str, int] | None = None  # the previous kept segment: normalised text, window

    def repeats(self, piece: Piece, window_seek: int) -> bool:
        key = " ".join(_PUNCTUATION.sub(" ", piece.text.lower()).split())
        last = self.last
        if last is not None and key == last[0] and (last[1] != window_seek or len(key.split()) >= 3):
            return True
        self.last = (key, window_seek)
        return False


class Recording:
    """Where decoded times land: the recording's clock (through the VAD's speech map, when one ran),
    within its duration; and the progress reported on it."""

    def __init__(self, speech_map, duration: float, geometry: Geometry, progress, on_segment=None):
        self.speech_map, self.duration, self.geometry, self.progress = speech_map, duration, geometry, progress
        self.on_segment = on_segment  # hears each segment as it is made (final: none is dropped later)

    def done(self, seek: int) -> None:
        """The decoded audio is done up to mel frame ``seek``."""
        if self.progress is None:
            return
        t = self.geometry.seconds(seek)
        if self.speech_map is not None:
            t = self.speech_map.to_original(t)
        self.progress(min(t, self.duration), self.duration)

    def segment(self, index: int, seek: int, piece: Piece, result) -> Segment:
        g = self.geometry
        start, end, words = piece.start, piece.end, piece.words
        m = self.speech_map
        if m is not None:
            if words:
                words = [self._map_word(w) for w in words]
                start, end = words[0].start, words[-1].end
            else:
                start, end = _inside_one_region(m, start, end)
            seek = round(m.to_original(g.seconds(seek)) * g.sample_rate / g.hop)
        start = min(max(start, 0.0), self.duration)
        end = min(max(end, start), self.duration)
        segment = Segment(
            id=index,
            start=round(start, 3),
            end=round(end, 3),
            text=piece.text,
            tokens=tuple(piece.tokens),
            words=tuple(words) if words is not None else None,
            seek=seek,
            temperature=result.temperature,
            avg_logprob=result.avg_logprob,
            compression_ratio=result.compression_ratio,
            no_speech_prob=result.no_speech_prob,
        )
        if self.on_segment is not None:
            self.on_segment(segment)
        return segment

    def _map_word(self, word: Word) -> Word:
        m = self.speech_map
        region = m.region((word.start + word.end) / 2)  # both ends in the region of the middle
        return dataclasses.replace(
            word, start=m.to_original(word.start, region=region), end=m.to_original(word.end, region=region)
        )


def _inside_one_region(m, start: float, end: float) -> tuple[float, float]:
    """A segment's times (on the joined speech) in the recording's clock, kept inside one VAD
    region: one that crosses a seam would otherwise stretch over the silence cut out there (its
    end landing in the next region); it keeps the region holding most of it."""
    first, last = m.region(start), m.region(end, is_end=True)
    if first == last:
        return m.to_original(start, region=first), m.to_original(end, is_end=True, region=last)
    seam = m.joined[first] + m.lengths[first]
    if seam - start >= end - m.joined[last]:
        return m.to_original(start, region=first), m.original[first] + m.lengths[first]
    return m.original[last], m.to_original(end, is_end=True, region=last)
