"""What the encoder-only engines (``ctc.py``, ``transducer.py``) share: their set-up and their loop over chunks.

The set-up checks the bundle's blank and the model's language and settles the chunk length and
overlap (the options', else the bundle's, else the defaults below). The loop cuts the audio into
overlapping chunks (``longform.py``), computes their features ``batch_size`` chunks at a time,
asks the engine for each chunk's tokens, turns them into words, keeps each chunk's own, and
groups the words into segments on the recording's clock.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from ...errors import CapabilityError
from ...options import TranscribeOptions
from . import EngineOutput
from .longform import TimedWord, feature_batches, keep_own, plan_chunks, to_segments

log = logging.getLogger("oasr")

# Seconds per chunk when neither the options nor the bundle say. A FastConformer encoder costs
# about the same per second of audio from 30 s to 90 s chunks (attention grows with the chunk,
# the 2 x 4 s overlaps shrink), and a minute or less of audio then runs in one pass, as NeMo does.
CHUNK_LENGTH = 60.0
CHUNK_OVERLAP = 4.0  # seconds shared with each neighbour: longer than any word

# A token decoded in a chunk: (label id, first frame, end frame (exclusive), probability).
Span = tuple[int, int, int, float]


class ChunkedEngine:
    """An engine decoding overlapping chunks; a subclass gives ``decode``."""

    reads_windows = True  # takes a SampleFile: each chunk's samples are read from it (longform.feature_batches)
    blank_name = "blank id"  # what the bundle must name, as the refusal says it

    def __init__(self, loaded, options: TranscribeOptions):
        defaults = loaded.decoding
        if defaults.blank_id is None:
            raise CapabilityError(f"this {loaded.architecture} bundle names no {self.blank_name}; re-convert it")
        self.language = defaults.options.get("language", "")
        if options.language is not None and self.language and options.language != self.language:
            raise CapabilityError(f"this {loaded.architecture} model transcribes {self.language} only, not {options.language!r}")
        self.loaded, self.options = loaded, options
        self.tokenizer = loaded.tokenizer()
        self.blank = defaults.blank_id
        self.length = options.chunk_length or defaults.options.get("chunk_length", CHUNK_LENGTH)
        self.overlap = options.chunk_overlap if options.chunk_overlap is not None else defaults.options.get("chunk_overlap", CHUNK_OVERLAP)
        if self.overlap * 2 >= self.length:
            raise CapabilityError(f"a chunk overlap of {self.overlap:g} s needs chunks longer than {2 * self.overlap:g} s")

    def decode(self, features: torch.Tensor, lengths: torch.Tensor) -> list[list[Span]]:
        """Features [B, F, T] (the model's dtype) and their lengths [B] -> each chunk's tokens, in
        output frames (the model's ``output_stride`` feature frames each)."""
        raise NotImplementedError

    def run(self, samples: np.ndarray, speech_map, duration: float, progress) -> EngineOutput:
        spec = self.loaded.feature_spec
        rate = spec.sample_rate
        model = self.loaded.model
        parameter = next(model.parameters())
        frame_seconds = spec.hop_length * model.output_stride / rate
        chunks = plan_chunks(len(samples), rate, self.length, self.overlap)
        log.debug("%d chunk(s) of %.1f s, %.1f s overlap", len(chunks), self.length, self.overlap)
        words: list[TimedWord] = []
        for batch, padded, lengths in feature_batches(samples, chunks, spec, self.options.batch_size, parameter.device):
            for c, spans in zip(batch, self.decode(padded.to(parameter.dtype), lengths)):
                words += keep_own(words_from_tokens(self.tokenizer, spans, c.start / rate, frame_seconds), c)
            if progress is not None:
                done = batch[-1].own_end
                progress(min(speech_map.to_original(done) if speech_map else done, duration), duration)
        segments = to_segments(words, speech_map, duration, with_words=self.options.word_timestamps)
        return EngineOutput(segments, self.language if segments else "", None)


def words_from_tokens(tokenizer, spans: list[Span], offset: float, frame: float) -> list[TimedWord]:
    """(id, first frame, end frame (exclusive), probability) per token -> words: a label whose text
    starts with a space starts a new word, a label that is only a space separates words."""
    words: list[TimedWord] = []
    probs: list[list[float]] = []
    new_word = True
    for token_id, first, end_frame, probability in spans:
        text = tokenizer.token_text(token_id)
        if not text.strip():  # a separator: the next label starts a word
            new_word = True
            continue
        start, end = offset + first * frame, offset + end_frame * frame
        if new_word or text.startswith(" "):
            words.append(TimedWord(" " + text.lstrip(" "), start, end, 0.0, [token_id]))
            probs.append([probability])
        else:
            w = words[-1]
            w.text, w.end = w.text + text, end
            w.tokens.append(token_id)
            probs[-1].append(probability)
        new_word = False
    for w, p in zip(words, probs):
        w.probability = sum(p) / len(p)
    return words
