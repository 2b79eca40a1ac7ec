"""openai-whisper's ``hallucination_silence_threshold``, with word timestamps: a segment of improbable,
too long or too short words, surrounded by silence, is dropped and the window restarts after it."""

from __future__ import annotations

from ....results import Word
from .window import Geometry, Piece, Window

_PUNCTUATION_WORDS = "\"'“¿([{-\"'.。,，!！?？:：”)]}、"  # a word that is a substring of this is punctuation


def last_end(pieces: list[Piece]) -> float | None:
    """openai's ``get_end``: the end of the last word, else of the last segment."""
    for piece in reversed(pieces):
        if piece.words:
            return piece.words[-1].end
    return pieces[-1].end if pieces else None


def skip_hallucinations(
    pieces: list[Piece],
    window: Window,
    seek: int,
    single_ending: bool,
    *,
    threshold: float,
    last_speech: float,
    content_frames: int,
    geometry: Geometry,
) -> tuple[int, list[Piece]]:
    """The pieces kept and the next seek. ``last_speech``: where speech ended before this window;
    ``content_frames``: the recording's mel frames (a skip near its end ends the loop)."""
    fps = geometry.frames_per_second
    time_offset, previous_seek, size = window.start, window.seek, window.size
    window_end = time_offset + geometry.seconds(geometry.n_frames)
    segment_duration = geometry.seconds(size)
    if not single_ending:
        end = last_end(pieces)
        if end is not None and end > time_offset:
            seek = round(end * fps) if window_end - end > threshold else previous_seek + size
    first = next((p for p in pieces if p.words), None)
    if first is not None and _is_anomaly(first):
        gap = first.start - time_offset
        if gap > threshold:  # skip the leading silence, decode again from there
            return previous_seek + round(gap * fps), []
    end = last_speech
    for i, piece in enumerate(pieces):
        if not piece.words:
            continue
        if _is_anomaly(piece):
            following = next((p for p in pieces[i + 1 :] if p.words), None)
            next_start = following.words[0].start if following else time_offset + segment_duration
            silence_before = piece.start - end > threshold or piece.start < threshold or piece.start - time_offset < 2.0
            silence_after = next_start - piece.end > threshold or _is_anomaly(following) or window_end - piece.end < 2.0
            if silence_before and silence_after:
                seek = round(max(time_offset + 1, piece.start) * fps)
                if geometry.seconds(content_frames) - piece.end < threshold:
                    seek = content_frames
                return seek, pieces[:i]
        end = piece.end
    return seek, pieces


def _word_anomaly(word: Word) -> float:
    duration = word.end - word.start
    score = 0.0
    if word.probability < 0.15:
        score += 1.0
    if duration < 0.133:
        score += (0.133 - duration) * 15
    if duration > 2.0:
        score += duration - 2.0
    return score


def _is_anomaly(piece: Piece | None) -> bool:
    if piece is None or not piece.words:
        return False
    words = [w for w in piece.words if w.word not in _PUNCTUATION_WORDS][:8]
    score = sum(_word_anomaly(w) for w in words)
    return score >= 3 or score + 0.01 >= len(words)
