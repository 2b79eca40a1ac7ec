"""Sequential long-form Whisper, as openai-whisper's ``transcribe`` does it.

30-second windows over the log-mel of the whole file (computed a window at a time, with the whole
file's values); each window is encoded once, decoded with temperature fallback, and the next
window starts at the last complete segment's end timestamp. Windows the model calls silent are
skipped, and so, without decoding, are windows of pure silence (``fallback.py``). Previous text
conditions the next window until a window needs a temperature above 0.5. A segment repeating the
previous one is dropped (``segments.Repeats``). The language is detected on the first decoded
window. With a VAD only the detected speech is decoded and times are mapped back to the
recording (``segments.Recording``).
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F

from ....io.samples import SampleFile
from ....results import Segment
from ....threads import fit_threads
from ...vad.energy import frame_levels_db
from .decoder import WindowDecoder
from .fallback import PROMPT_RESET_TEMPERATURE, SILENCE_FLOOR_DB, holds_no_speech, is_quiet
from .hallucinations import last_end, skip_hallucinations
from .mel import whole_file_mel
from .segments import Recording, Repeats, split
from .window import Piece, Window

log = logging.getLogger("oasr")


def decode_sequentially(decoder: WindowDecoder, recording: Recording, samples) -> tuple[list[Segment], str, float | None]:
    """Segments, the language ("" when nothing was decoded) and its probability when detected."""
    o, d, g = decoder.options, decoder.decoding, decoder.geometry
    # A SampleFile (a long recording on disk) is read a window at a time by the front end.
    audio = samples.tensor(decoder.device) if isinstance(samples, SampleFile) else torch.from_numpy(samples).to(decoder.device)
    mel = whole_file_mel(audio, decoder.loaded.feature_spec, g)  # one window at a time
    content_frames = len(samples) // g.hop  # the padded file's frames less the 30 s of zeros
    # Detected on the first window that is decoded; "" when there is none to detect it on.
    language = decoder.known_language()
    probability = None
    levels = frame_levels_db(samples, g.hop)  # one level per mel frame
    all_tokens: list[int] = decoder.initial_prompt()
    prompt_reset_since = 0
    last_speech = 0.0  # end of the last word, with word timestamps
    segments: list[Segment] = []
    repeats = Repeats()
    seek = 0
    while seek < content_frames:
        size = min(g.n_frames, content_frames - seek)
        time_offset = g.seconds(seek)
        if is_quiet(levels[seek : seek + size]):
            log.debug("window at %.2f s is silent (below %.0f dBFS); skipped", time_offset, SILENCE_FLOOR_DB)
            seek += size
            recording.done(seek)
            continue
        fit_threads()  # the cores other processes left free since the last window
        window_mel = F.pad(mel(seek, size), (0, g.n_frames - size)).to(decoder.dtype)
        window = Window(seek, size, time_offset, window_mel, decoder.encode(window_mel, only=content_frames <= g.n_frames))
        if language is None:
            language, probability = decoder.detect_language(window.features)
        result, temperature = decoder.decode(window.features, all_tokens[prompt_reset_since:], language)
        if holds_no_speech(result, d):
            log.debug("window at %.2f s: no speech (p=%.2f); skipped", time_offset, result.no_speech_prob)
            seek += size
            recording.done(seek)
            continue
        pieces, seek, single_ending = split(decoder, result.tokens, seek, size)
        if o.word_timestamps and pieces:
            seek, pieces = _with_words(decoder, pieces, window, language, seek, single_ending, last_speech, content_frames)
            last_speech = _last_speech(pieces, last_speech)
        for piece in pieces:
            if piece.is_empty:
                continue
            if repeats.repeats(piece, window.seek):
                log.debug("dropped a segment repeating the previous one: %r", piece.text)
                continue
            segments.append(recording.segment(len(segments), window.seek, piece, result))
            all_tokens.extend(piece.tokens)
        if not d.condition_on_previous_text or temperature > PROMPT_RESET_TEMPERATURE:
            prompt_reset_since = len(all_tokens)
        recording.done(min(seek, content_frames))
    return segments, language or "", probability


def _with_words(decoder: WindowDecoder, pieces: list[Piece], window: Window, language, seek, single_ending, last_speech, content_frames):
    """Word times for this window's segments (one alignment pass, openai-whisper's rules for
    segment bounds); the next window starts after the last word; optionally, suspect
    segments in long silences are skipped. Returns the next seek and the pieces kept."""
    d, g = decoder.decoding, decoder.geometry
    decoder.align(pieces, window, language, last_speech)
    end = last_end(pieces)
    if not single_ending and end is not None and end > window.start:
        seek = round(end * g.frames_per_second)
    if d.hallucination_silence_threshold is not None:
        seek, pieces = skip_hallucinations(
            pieces,
            window,
            seek,
            single_ending,
            threshold=d.hallucination_silence_threshold,
            last_speech=last_speech,
            content_frames=content_frames,
            geometry=g,
        )
    return seek, pieces


def _last_speech(pieces: list[Piece], before: float) -> float:
    end = last_end(pieces)
    return before if end is None else end
