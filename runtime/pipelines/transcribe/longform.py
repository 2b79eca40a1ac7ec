"""Long audio for encoder-only families: overlapping chunks, merged back word by word.

The audio is cut into chunks of ``length`` seconds that overlap their neighbours by ``overlap``
seconds. Each chunk owns the middle of its overlaps: a word decoded in a chunk is kept when its
midpoint lies in that chunk's own span, so a word near a cut is heard whole by both chunks and
kept once, by the one it lies in. Words are then grouped into segments at pauses.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterator

import torch

from ...features import feature_extractor
from ...io.samples import SampleFile
from ...results import Segment, Word
from ..vad.energy import SpeechMap

SEGMENT_PAUSE = 1.0  # seconds of silence between two words that start a new segment
SEGMENT_MAX = 30.0  # seconds: a segment is closed once it spans this long


@dataclass(frozen=True)
class Chunk:
    start: int  # samples: what the model hears
    end: int
    own_start: float  # seconds: words whose midpoint lies in [own_start, own_end) are this chunk's
    own_end: float


def plan_chunks(n_samples: int, sample_rate: int, length: float, overlap: float) -> list[Chunk]:
    """Chunks covering ``n_samples``: each ``length`` s (the last may be shorter), starting every
    ``length - overlap`` s; their own spans tile the audio without gaps or overlaps."""
    total = n_samples / sample_rate
    if n_samples == 0:
        return []
    size, step = round(length * sample_rate), round((length - overlap) * sample_rate)
    starts = [0]
    while starts[-1] + size < n_samples:
        starts.append(starts[-1] + step)
    chunks = []
    for i, a in enumerate(starts):
        b = min(a + size, n_samples)
        own_start = 0.0 if i == 0 else (a + (starts[i - 1] + size - a) / 2) / sample_rate
        own_end = total if i == len(starts) - 1 else (starts[i + 1] + (b - starts[i + 1]) / 2) / sample_rate
        chunks.append(Chunk(a, b, own_start, own_end))
    return chunks


@dataclass
class TimedWord:
    """A word with the token ids it was decoded from; times in seconds of the chunked audio."""

    text: str  # with its leading space
    start: float
    end: float
    probability: float
    tokens: list[int]


def feature_batches(samples, chunks: list[Chunk], spec, batch_size: int, device) -> Iterator[tuple[list[Chunk], torch.Tensor, torch.Tensor]]:
    """Per batch of ``batch_size`` chunks: (the chunks, their features padded [B, F, T], the
    feature lengths [B]), each chunk's features computed from its own samples."""
    features_of = feature_extractor(spec)
    audio = samples.tensor(device) if isinstance(samples, SampleFile) else torch.from_numpy(samples).to(device)
    for first in range(0, len(chunks), batch_size):
        batch = chunks[first : first + batch_size]
        feats = [features_of(audio[c.start : c.end], spec) for c in batch]
        lengths = torch.tensor([f.shape[-1] for f in feats], device=device)
        padded = torch.nn.utils.rnn.pad_sequence([f.T for f in feats], batch_first=True).transpose(1, 2)
        yield batch, padded, lengths


def keep_own(words: list[TimedWord], chunk: Chunk) -> list[TimedWord]:
    return [w for w in words if chunk.own_start <= (w.start + w.end) / 2 < chunk.own_end]


def to_segments(words: list[TimedWord], speech_map: SpeechMap | None, duration: float, with_words: bool) -> list[Segment]:
    """Words (in order, on the decoded audio's clock) -> segments on the original clock."""
    words = [_on_original(w, speech_map, duration) for w in words]
    groups: list[list[TimedWord]] = []
    for w in words:
        if groups and w.start - groups[-1][-1].end < SEGMENT_PAUSE and w.end - groups[-1][0].start <= SEGMENT_MAX:
            groups[-1].append(w)
        else:
            groups.append([w])
    segments = []
    for i, group in enumerate(groups):
        timed = tuple(Word(w.text, round(w.start, 3), round(w.end, 3), round(w.probability, 4)) for w in group)
        segments.append(
            Segment(
                id=i,
                start=timed[0].start,
                end=timed[-1].end,
                text="".join(w.text for w in group),
                tokens=tuple(t for w in group for t in w.tokens),
                words=timed if with_words else None,
            )
        )
    return segments


def _on_original(word: TimedWord, speech_map: SpeechMap | None, duration: float) -> TimedWord:
    start, end = word.start, word.end
    if speech_map is not None:
        region = speech_map.region((start + end) / 2)  # both ends in the region of the middle
        start, end = speech_map.to_original(start, region=region), speech_map.to_original(end, region=region)
    start = min(max(start, 0.0), duration)
    return dataclasses.replace(word, start=start, end=min(max(end, start), duration))
