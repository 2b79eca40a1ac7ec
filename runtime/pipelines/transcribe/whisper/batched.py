"""Batched long-form Whisper (``batch_size`` above 1): speech packed into windows, decoded N at a time.

As faster-whisper's ``BatchedInferencePipeline`` and WhisperX do it: Silero VAD finds the speech
(regions of at most 30 s; silences of 160 ms or more end a region), consecutive regions are packed
into windows of at most 30 s (a window spans its regions and the pauses between them), and the
windows go through the encoder and the decoder ``batch_size`` at a time. No window is conditioned
on another's text (each starts from its own start-of-transcript sequence, after the initial
prompt when there is one), so a batch decodes as one; a window that needs a fallback at the first
temperature falls back on its own, by the sequential loop's rules (``fallback.py``). A window's
timestamp tokens give its segments (an unfinished last one ends with the window), word times
come from the window's own cross-attention alignment, and every time is mapped back to the
recording (through the given VAD's map too, when one ran before).
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from ....options import VadOptions
from ....results import Segment
from ....threads import fit_threads
from .decoder import WindowDecoder
from .fallback import holds_no_speech
from .mel import window_mel
from .segments import Recording, split_whole
from .window import Window

log = logging.getLogger("oasr")

# faster-whisper's batched VAD settings: short silences cut, 0.4 s of context kept
BATCHED_VAD = VadOptions(min_speech_s=0.0, min_silence_s=0.16, speech_pad_s=0.4, max_speech_s=30.0)


def pack_windows(regions: list[tuple[int, int]], limit: int) -> list[tuple[int, int]]:
    """Sorted, disjoint ``[start, end)`` regions -> windows of at most ``limit`` samples, each
    spanning consecutive regions (faster-whisper's ``merge_segments``); a region longer than
    ``limit`` is cut into pieces of ``limit``."""
    windows: list[tuple[int, int]] = []
    start = end = None
    for a, b in regions:
        while b - a > limit:
            if start is not None:
                windows.append((start, end))
                start = None
            windows.append((a, a + limit))
            a += limit
        if start is not None and b - start > limit:
            windows.append((start, end))
            start = None
        if start is None:
            start = a
        end = b
    if start is not None and end > start:
        windows.append((start, end))
    return windows


def decode_batched(decoder: WindowDecoder, recording: Recording, samples) -> tuple[list[Segment], str, float | None]:
    """Segments, the language ("" when nothing was decoded) and its probability when detected."""
    from ...vad.silero import speech_probabilities, speech_samples

    o, d, g = decoder.options, decoder.decoding, decoder.geometry
    spec = decoder.loaded.feature_spec
    audio = np.asarray(samples, dtype=np.float32)
    regions = speech_samples(speech_probabilities(audio), len(audio), BATCHED_VAD)
    windows = pack_windows(regions, g.n_frames * g.hop)
    log.info("batched: %d speech region(s) in %d window(s) of at most 30 s, %d at a time", len(regions), len(windows), o.batch_size)
    language = decoder.known_language()
    probability = None
    prompt = decoder.initial_prompt()
    tensor = torch.from_numpy(audio).to(decoder.device)
    last_speech = 0.0  # end of the last word, with word timestamps
    segments: list[Segment] = []
    for first in range(0, len(windows), o.batch_size):
        batch = windows[first : first + o.batch_size]
        fit_threads()  # the cores other processes left free since the last batch
        mels = torch.stack([window_mel(tensor[a:b], spec, g) for a, b in batch]).to(decoder.dtype)
        # One window at a time: a window's GEMMs are already large, and a batch's activations
        # (100 MB for 8 windows of base) would be fresh pages, faulted in at every layer.
        features = torch.cat([decoder.encode(mel, only=len(windows) == 1) for mel in mels])
        if language is None:
            language, probability = decoder.detect_language(features)
        results = decoder.decode_batch(features, prompt, language)
        for j, ((a, b), result) in enumerate(zip(batch, results)):
            seek, size = a // g.hop, (b - a) // g.hop
            window = Window(seek, size, g.seconds(seek), mels[j], features[j : j + 1])
            result, _ = decoder.decode(window.features, prompt, language, first=result)
            if holds_no_speech(result, d):
                log.debug("window at %.2f s: no speech (p=%.2f); skipped", a / g.sample_rate, result.no_speech_prob)
                continue
            pieces = split_whole(decoder, result.tokens, seek, size)
            if o.word_timestamps and pieces:
                aligned = decoder.align(pieces, window, language, max(last_speech, window.start))
                last_speech = aligned.last_speech_timestamp
            for piece in pieces:
                if not piece.is_empty:
                    segments.append(recording.segment(len(segments), seek, piece, result))
        recording.done(batch[-1][1] // g.hop)
    return segments, language or "", probability
