"""Speakers for transcript segments: each word takes the speaker of the turn it overlaps most
(the nearest turn when it falls in a pause between turns), and a segment whose words change
speaker is split at those word boundaries, so every segment has exactly one speaker.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

from ...results import Segment, SpeakerTurn, Word


def speaker_of(start: float, end: float, turns: Sequence[SpeakerTurn]) -> str | None:
    """The speaker of the turn overlapping [start, end] most; with no overlap, of the nearest
    turn; None when there are no turns."""
    if not turns:
        return None
    starts = np.fromiter((t.start for t in turns), dtype=np.float64, count=len(turns))
    ends = np.fromiter((t.end for t in turns), dtype=np.float64, count=len(turns))
    overlap = np.minimum(ends, end) - np.maximum(starts, start)
    if overlap.max() > 0:
        return turns[int(np.argmax(overlap))].speaker
    distance = np.maximum(starts - end, start - ends)
    return turns[int(np.argmin(distance))].speaker


def attribute_speakers(
    segments: Sequence[Segment],
    turns: Sequence[SpeakerTurn],
    encode: Callable[[str], list[int]] | None = None,
    keep_words: bool = True,
) -> list[Segment]:
    """``segments`` with a speaker each (and on each word), split where the speaker changes
    between words; ids renumbered. A piece of a split segment gets ``encode(its text)`` as its
    tokens (the original tokens when ``encode`` is None). ``keep_words=False`` drops the words
    (they were only needed here)."""
    out: list[Segment] = []
    for segment in segments:
        words = segment.words or ()
        if not words:
            speaker = speaker_of(segment.start, segment.end, turns)
            out.append(dataclasses.replace(segment, speaker=speaker, words=segment.words if keep_words else None))
            continue
        tagged = [dataclasses.replace(w, speaker=speaker_of(w.start, w.end, turns)) for w in words]
        pieces: list[list[Word]] = []
        for word in tagged:
            if pieces and pieces[-1][-1].speaker == word.speaker:
                pieces[-1].append(word)
            else:
                pieces.append([word])
        for piece in pieces:
            split = len(pieces) > 1
            text = "".join(w.word for w in piece) if split else segment.text
            out.append(
                dataclasses.replace(
                    segment,
                    start=piece[0].start if split else segment.start,
                    end=piece[-1].end if split else segment.end,
                    text=text,
                    tokens=tuple(encode(text)) if split and encode is not None else segment.tokens,
                    words=tuple(piece) if keep_words else None,
                    speaker=piece[0].speaker,
                )
            )
    return [dataclasses.replace(s, id=i) for i, s in enumerate(out)]
