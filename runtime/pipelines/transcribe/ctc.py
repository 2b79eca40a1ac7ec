"""The ``ctc`` engine: encoder-only models whose frames each give a distribution over labels.

A CTC model implements ``ctc_log_probs(features [B, C, T], lengths [B]) -> (log_probs [B, T', V],
lengths [B])`` and ``output_stride`` (feature frames per output frame); its bundle names the
blank (``DecodingDefaults.blank_id``) and, for single-language models, ``options["language"]``.
Its tokenizer gives ``token_text(id)``: the text a label adds, starting with a space where it
starts a word (a label that is only a space separates words). Long audio runs in overlapping
chunks (``longform.py``), ``batch_size`` chunks per forward pass. ``CtcDecoding.beam_size`` above 1
decodes by prefix beam search. ``words_from_tokens`` is shared with the transducer engine.
"""

from __future__ import annotations

import logging

import numpy as np

from ...decoding.ctc.search import beam_ctc, greedy_ctc
from ...errors import CapabilityError
from ...decoding.ctc.options import CtcDecoding
from ...decoding.family import section_for
from ...options import TranscribeOptions
from . import EngineOutput
from .longform import TimedWord, feature_batches, keep_own, plan_chunks, to_segments

log = logging.getLogger("oasr")

# Seconds per chunk when neither the options nor the bundle say. A FastConformer encoder costs
# about the same per second of audio from 30 s to 90 s chunks (attention grows with the chunk,
# the 2 x 4 s overlaps shrink), and a minute or less of audio then runs in one pass, as NeMo does.
CHUNK_LENGTH = 60.0
CHUNK_OVERLAP = 4.0  # seconds shared with each neighbour: longer than any word


class Engine:
    reads_windows = True  # takes a SampleFile: each chunk's samples are read from it (longform.feature_batches)

    def __init__(self, loaded, options: TranscribeOptions, section: CtcDecoding | None = None):
        section = section or section_for(loaded.decoding.family, options)
        self.beam_size = section.beam_size
        defaults = loaded.decoding
        if defaults.blank_id is None:
            raise CapabilityError(f"this {loaded.architecture} bundle names no CTC blank id; re-convert it")
        self.language = defaults.options.get("language", "")
        if options.language is not None and self.language and options.language != self.language:
            raise CapabilityError(
                f"this {loaded.architecture} model transcribes {self.language} only, not {options.language!r}"
            )
        self.loaded, self.options = loaded, options
        self.tokenizer = loaded.tokenizer()
        self.blank = defaults.blank_id
        self.length = options.chunk_length or defaults.options.get("chunk_length", CHUNK_LENGTH)
        self.overlap = options.chunk_overlap if options.chunk_overlap is not None else defaults.options.get("chunk_overlap", CHUNK_OVERLAP)
        if self.overlap * 2 >= self.length:
            raise CapabilityError(f"a chunk overlap of {self.overlap:g} s needs chunks longer than {2 * self.overlap:g} s")

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
            log_probs, out_lengths = model.ctc_log_probs(padded.to(parameter.dtype), lengths)
            for c, lp, n in zip(batch, log_probs, out_lengths.tolist()):
                tokens = greedy_ctc(lp[:n], self.blank) if self.beam_size == 1 else beam_ctc(lp[:n], self.blank, self.beam_size)
                spans = [(t.id, t.first_frame, t.last_frame + 1, t.probability) for t in tokens]
                words += keep_own(words_from_tokens(self.tokenizer, spans, c.start / rate, frame_seconds), c)
            if progress is not None:
                done = batch[-1].own_end
                progress(min(speech_map.to_original(done) if speech_map else done, duration), duration)
        segments = to_segments(words, speech_map, duration, with_words=self.options.word_timestamps)
        return EngineOutput(segments, self.language if segments else "", None)


def words_from_tokens(tokenizer, spans, offset: float, frame: float) -> list[TimedWord]:
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
