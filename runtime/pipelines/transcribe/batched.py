"""Batched long-form Whisper (``batch_size`` above 1): speech packed into windows, decoded N at a time.

As faster-whisper's ``BatchedInferencePipeline`` and WhisperX do it: Silero VAD finds the speech
(regions of at most 30 s; silences of 160 ms or more end a region), consecutive regions are packed
into windows of at most 30 s (a window spans its regions and the pauses between them), and the
windows go through the encoder and the decoder ``batch_size`` at a time. No window is conditioned
on another's text (each starts from its own start-of-transcript sequence, after the initial
prompt when there is one), so a batch decodes as one; a window that fails the compression-ratio or
log-probability threshold at the first temperature falls back on its own, as the sequential loop
does. A window's timestamp tokens give its segments (an unfinished last one ends with the
window), word times come from the window's own cross-attention alignment, and every time is
mapped back to the recording (through the given VAD's map too, when one ran before).
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from ...options import VadOptions
from ...results import Segment
from ...threads import fit_threads
from .whisper import _LongForm, _Piece

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


class BatchedLongForm(_LongForm):
    """The sequential engine's set-up (decoder, options, segment building), batched windows."""

    def __call__(self, samples) -> tuple[list[Segment], str, float | None]:
        from ..vad.silero import speech_probabilities, speech_samples

        o, d = self.options, self.decoding
        audio = np.asarray(samples, dtype=np.float32)
        self.content_frames, self.content_duration = len(audio) // self.hop, len(audio) / self.sample_rate
        regions = speech_samples(speech_probabilities(audio), len(audio), BATCHED_VAD)
        windows = pack_windows(regions, self.n_frames * self.hop)
        log.info("batched: %d speech region(s) in %d window(s) of at most 30 s, %d at a time", len(regions), len(windows), o.batch_size)
        language = o.language or (None if self.tokenizer.multilingual else "en")
        probability = None
        prompt = self.tokenizer.encode(" " + d.initial_prompt.strip()) if d.initial_prompt else []
        tensor = torch.from_numpy(audio).to(self.device)
        segments: list[Segment] = []
        for first in range(0, len(windows), o.batch_size):
            batch = windows[first : first + o.batch_size]
            fit_threads()  # the cores other processes left free since the last batch
            mels = torch.stack([self._window_mel(tensor[a:b]) for a, b in batch]).to(self.dtype)
            # One window at a time: a window's GEMMs are already large, and a batch's activations
            # (100 MB for 8 windows of base) would be fresh pages, faulted in at every layer.
            features = torch.cat([self.model.embed_audio(mel[None]) for mel in mels])
            if language is None:
                language, probability = self._detect_language(features)
            tokens, sot_index = self.decoder.initial_tokens(language, o.task, prompt)
            prompted = self.decoder.prompt(features, tokens, sot_index)
            results = self.decoder.decode_batch(prompted, d.temperatures[0])
            for j, ((a, b), result) in enumerate(zip(batch, results)):
                seek, size = a // self.hop, (b - a) // self.hop
                if len(d.temperatures) > 1 and self._fails(result):
                    result, _ = self._decode_with_fallback(features[j : j + 1], prompt, language, first=result)
                if self._no_speech(result):
                    log.debug("window at %.2f s: no speech (p=%.2f); skipped", a / self.sample_rate, result.no_speech_prob)
                    continue
                pieces = self._window_pieces(result.tokens, seek, size)
                if o.word_timestamps and pieces:
                    last = max(self.last_speech, self._seconds(seek))
                    aligned = self._align(pieces, mels[j], features[j : j + 1], size, self._seconds(seek), language, last)
                    self.last_speech = aligned.last_speech_timestamp
                for piece in pieces:
                    if piece.start == piece.end or not piece.text.strip():
                        continue
                    segments.append(self._segment(len(segments), seek, piece, result))
            self._done(batch[-1][1] // self.hop)
        return segments, language or "", probability

    def _window_mel(self, audio: torch.Tensor) -> torch.Tensor:
        """One window's log-mel [n_mels, 3000]: its samples then zeros to 30 s (its own clamp
        reference, as a clip decoded alone)."""
        from ...features import feature_extractor

        mel = feature_extractor(self.spec)(audio, self.spec, padding=self.n_frames * self.hop)
        return mel[:, : self.n_frames]

    def _fails(self, result) -> bool:
        """The sequential loop's fallback test at the first temperature (silence excepted)."""
        d = self.decoding
        failed = d.compression_ratio_threshold is not None and result.compression_ratio > d.compression_ratio_threshold
        low = d.logprob_threshold is not None and result.avg_logprob < d.logprob_threshold
        silent = d.no_speech_threshold is not None and result.no_speech_prob > d.no_speech_threshold
        return failed or (low and not silent)

    def _no_speech(self, result) -> bool:
        d = self.decoding
        if d.no_speech_threshold is None or result.no_speech_prob <= d.no_speech_threshold:
            return False
        return d.logprob_threshold is None or result.avg_logprob <= d.logprob_threshold

    def _window_pieces(self, tokens: tuple[int, ...], seek: int, size: int) -> list[_Piece]:
        """The sequential segmentation of a window, plus its unfinished last segment (no later
        window starts where it began): that one ends with the window's audio."""
        pieces, _, single_ending = self._split(tokens, seek, size)
        used = sum(len(p.tokens) for p in pieces)
        tail = list(tokens[used:])
        tb = self.tokenizer.timestamp_begin
        if tail and not single_ending and any(t < tb for t in tail):
            start = self._seconds(seek) + (tail[0] - tb) * self.time_precision if tail[0] >= tb else pieces[-1].end
            pieces.append(self._piece(start, self._seconds(seek + size), tail))
        return pieces
