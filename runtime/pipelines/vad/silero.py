"""Silero VAD over a whole recording: speech probabilities per 32 ms chunk, and speech regions.

``speech_probabilities`` gives what silero-vad's ``get_speech_timestamps`` computes chunk by
chunk (the last chunk zero-padded, the state carried from the start), in one pass: the encoder
runs over blocks of chunks at once and only the LSTM steps through them in order.
``detect_speech`` turns them into regions with the package's rules (hysteresis between
``threshold`` and ``neg_threshold``, minimum speech and silence, padding, over-long regions split
at a silence), computed in samples as the package does and returned in seconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ...errors import InputError
from ...io.samples import as_samples
from ...options import VadOptions, validate_vad_options
from ...models.weights import torch_single_threaded
from ...loading import load_pretrained

__all__ = ["VadOptions", "validate_vad_options", "speech_probabilities", "speech_samples", "detect_speech"]

BLOCK_CHUNKS = 4096  # chunks encoded at once (131 s): bounds memory on long files


def speech_probabilities(audio: np.ndarray, model: Any = "silero-vad") -> np.ndarray:
    """audio [samples] 16 kHz mono float32 -> [ceil(samples / 512)] speech probability per chunk."""
    loaded = load_pretrained(model, task="vad")
    vad, config = loaded.model, loaded.config
    audio = as_samples(audio)  # a SampleFile stays on disk: blocks are read from it below
    if audio.ndim != 1:
        raise InputError(f"expected mono samples [samples], got an array of shape {audio.shape}")
    chunk, context = config.chunk_samples, config.context_samples
    n = -(-audio.size // chunk)
    if n == 0:
        return np.zeros(0, dtype=np.float32)
    param = next(vad.parameters())
    probs, state = [], None
    # One thread: the LSTM steps one 128-wide vector at a time, where a second thread only adds
    # barrier waits (and spins against any other busy process).
    with torch.inference_mode(), torch_single_threaded():
        for first in range(0, n, BLOCK_CHUNKS):
            count = min(BLOCK_CHUNKS, n - first)
            # Each chunk is read with the `context` samples before it (zeros before the start and
            # after the end); a block's stretch is copied, never the whole file.
            lo, hi = first * chunk - context, (first + count) * chunk
            stretch = np.zeros(hi - lo, dtype=np.float32)
            a, b = max(lo, 0), min(hi, audio.size)
            stretch[a - lo : b - lo] = audio[a:b]
            block = torch.from_numpy(stretch).to(param.device, param.dtype)
            chunks = block.unfold(0, chunk + context, chunk)  # [count, context + chunk], a view
            p, state = vad(chunks[None], state)
            probs.append(p[0].float().cpu())
    return torch.cat(probs).numpy()


def speech_samples(
    probs: np.ndarray, n_samples: int, options: VadOptions = VadOptions(), *, sample_rate: int = 16000, chunk: int = 512
) -> list[tuple[int, int]]:
    """Speech regions as ``[start, end)`` samples from per-chunk probabilities (get_speech_timestamps' rules)."""

    def samples(seconds: float) -> float:
        return round(seconds * sample_rate, 6)  # ms-exact, as the package's `sr * ms / 1000`

    min_speech, min_silence = samples(options.min_speech_s), samples(options.min_silence_s)
    pad = samples(options.speech_pad_s)
    min_silence_at_max = samples(options.min_silence_at_max_speech_s)
    max_speech = float("inf") if options.max_speech_s is None else samples(options.max_speech_s) - chunk - 2 * pad
    threshold, neg_threshold = options.threshold, options.negative_threshold

    speeches: list[list[int]] = []
    start: int | None = None  # start of the region in progress
    temp_end = 0  # where the current silence inside a region began (0: none)
    prev_end = next_start = 0  # the last split point, for the legacy max-speech rule
    possible_ends: list[tuple[int, int]] = []  # (silence start, its length) inside the region
    for i, p in enumerate(np.asarray(probs, dtype=np.float64).tolist()):
        cur = chunk * i
        if p >= threshold and temp_end:
            if cur - temp_end > min_silence_at_max:
                possible_ends.append((temp_end, cur - temp_end))
            temp_end = 0
            if next_start < prev_end:
                next_start = cur
        if p >= threshold and start is None:
            start = cur
            continue
        if start is not None and cur - start > max_speech:
            if options.split_at_longest_silence and possible_ends:
                prev_end, length = max(possible_ends, key=lambda e: e[1])
                speeches.append([start, prev_end])
                next_start = prev_end + length
                start = next_start if next_start < prev_end + cur else None
                prev_end = next_start = temp_end = 0
                possible_ends = []
            elif prev_end:
                speeches.append([start, prev_end])
                start = None if next_start < prev_end else next_start
                prev_end = next_start = temp_end = 0
                possible_ends = []
            else:
                speeches.append([start, cur])
                start = None
                prev_end = next_start = temp_end = 0
                possible_ends = []
                continue
        if p < neg_threshold and start is not None:
            if not temp_end:
                temp_end = cur
            silence = cur - temp_end
            if not options.split_at_longest_silence and silence > min_silence_at_max:
                prev_end = temp_end
            if silence < min_silence:
                continue
            if temp_end - start > min_speech:
                speeches.append([start, temp_end])
            start = None
            prev_end = next_start = temp_end = 0
            possible_ends = []
    if start is not None and n_samples - start > min_speech:
        speeches.append([start, n_samples])

    # Padding: each side grows by `pad`, or by half the gap when two regions are closer than 2 * pad.
    for i, speech in enumerate(speeches):
        if i == 0:
            speech[0] = int(max(0, speech[0] - pad))
        if i < len(speeches) - 1:
            gap = speeches[i + 1][0] - speech[1]
            if gap < 2 * pad:
                speech[1] += int(gap // 2)
                speeches[i + 1][0] = int(max(0, speeches[i + 1][0] - gap // 2))
            else:
                speech[1] = int(min(n_samples, speech[1] + pad))
                speeches[i + 1][0] = int(max(0, speeches[i + 1][0] - pad))
        else:
            speech[1] = int(min(n_samples, speech[1] + pad))
    return [(a, b) for a, b in speeches]


def detect_speech(
    audio: np.ndarray, model: Any = "silero-vad", options: VadOptions = VadOptions()
) -> list[tuple[float, float]]:
    """audio [samples] 16 kHz mono float32 -> sorted, disjoint (start_s, end_s) speech regions."""
    loaded = load_pretrained(model, task="vad")
    probs = speech_probabilities(audio, loaded)
    sr = loaded.config.sample_rate
    regions = speech_samples(probs, len(audio), options, sample_rate=sr, chunk=loaded.config.chunk_samples)
    return [(a / sr, b / sr) for a, b in regions]
