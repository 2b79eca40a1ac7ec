"""openai-whisper's temperature fallback and silence rules, the same for both loops.

A window's result needs a fallback (a decode at the next temperature) when it is too repetitive
(compression ratio above its threshold) or too improbable (average log-probability below its
threshold), unless it is silence: probably no speech (no-speech probability above its threshold)
and improbable; such a window is then skipped as holding no speech.
"""

from __future__ import annotations

import logging
from typing import Callable

import numpy as np

from ....decoding.whisper.options import WhisperDecoding

log = logging.getLogger("oasr")

SILENCE_FLOOR_DB = -60.0  # dBFS: a window whose every 10 ms frame is quieter is not decoded
PROMPT_RESET_TEMPERATURE = 0.5  # a window decoded above this does not condition the next one


def too_repetitive(result, d: WhisperDecoding) -> bool:
    return d.compression_ratio_threshold is not None and result.compression_ratio > d.compression_ratio_threshold


def needs_fallback(result, d: WhisperDecoding) -> bool:
    """openai-whisper's ``needs_fallback``."""
    improbable = d.logprob_threshold is not None and result.avg_logprob < d.logprob_threshold
    silence = d.no_speech_threshold is not None and result.no_speech_prob > d.no_speech_threshold and improbable
    return (too_repetitive(result, d) or improbable) and not silence


def holds_no_speech(result, d: WhisperDecoding) -> bool:
    """openai-whisper's ``should_skip``: probably no speech, unless the text is probable enough."""
    if d.no_speech_threshold is None or result.no_speech_prob <= d.no_speech_threshold:
        return False
    return d.logprob_threshold is None or result.avg_logprob <= d.logprob_threshold


def is_quiet(levels_db: np.ndarray) -> bool:
    """Every frame of the window below the silence floor: not worth decoding."""
    return levels_db.max(initial=-np.inf) < SILENCE_FLOOR_DB


def decode_with_fallback(decode_at: Callable[[float], object], d: WhisperDecoding, first=None):
    """The first result at the temperatures in order that needs no fallback; when every one does,
    the most probable one that was not too repetitive (faster-whisper's choice). Returns it and
    the last temperature tried (for the prompt reset). ``first``: the result at the first
    temperature when it is known already (a batched decode)."""
    tried, not_repetitive = [], []
    for k, temperature in enumerate(d.temperatures):
        result = first if k == 0 and first is not None else decode_at(temperature)
        tried.append(result)
        if not too_repetitive(result, d):
            not_repetitive.append(result)
        if not needs_fallback(result, d):
            return result, temperature
        log.debug(
            "temperature %.1f failed (compression %.2f, avg logprob %.2f)",
            temperature, result.compression_ratio, result.avg_logprob,
        )
    best = max(not_repetitive or tried, key=lambda r: r.avg_logprob)
    return best, d.temperatures[-1]
