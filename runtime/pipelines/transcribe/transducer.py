"""The ``rnnt`` and ``tdt`` engines: transducer models decoded greedily by batched label looping,
or (RNN-T, ``TransducerDecoding.beam_size`` above 1) by NeMo's beam search.

The model gives ``encode``, ``project_encoder``, ``predict`` and ``joint_logits`` (see
``oasr.decoding.transducer``); its bundle names the blank (``DecodingDefaults.blank_id``), TDT
``durations`` and ``max_symbols_per_step``. A token's time is its emitting frame; TDT tokens span
their predicted duration, RNN-T tokens one frame (the subsampled hop). Long audio runs in
overlapping chunks (``longform.py``), ``batch_size`` chunks per encoder pass. A hybrid RNNT+CTC
model (``options["ctc_head"]``) decodes with its CTC head given ``TransducerDecoding(decoder="ctc")``.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import torch

from ...decoding.transducer.search import beam_transducer, greedy_transducer
from ...errors import CapabilityError
from ...decoding.ctc.options import CtcDecoding
from ...decoding.transducer.options import TransducerDecoding
from ...decoding.family import section_for
from ...options import TranscribeOptions
from . import EngineOutput
from . import ctc
from .longform import TimedWord, feature_batches, keep_own, plan_chunks, to_segments

log = logging.getLogger("oasr")

def heads(loaded) -> str:
    """The decoders a transducer bundle offers, as --decoder names them."""
    return "rnnt and ctc" if loaded.decoding.options.get("ctc_head") else "rnnt only"


class Engine:
    reads_windows = True  # takes a SampleFile: each chunk's samples are read from it (longform.feature_batches)

    def __new__(cls, loaded, options: TranscribeOptions, section: TransducerDecoding | None = None):
        section = section or section_for(loaded.decoding.family, options)
        if section.decoder == "ctc":
            if not loaded.decoding.options.get("ctc_head"):
                raise CapabilityError(
                    f"--decoder ctc needs a hybrid RNNT+CTC model; this {loaded.architecture} model's heads: {heads(loaded)}"
                )
            # The CTC engine over the hybrid's auxiliary head (the blank is the same last label).
            if section.max_symbols_per_step is not None:
                raise CapabilityError("--max-symbols-per-step applies to the transducer head, not to --decoder ctc")
            return ctc.Engine(loaded, dataclasses.replace(options, beam_size=None, decoding=None), CtcDecoding(beam_size=section.beam_size))
        return super().__new__(cls)

    def __init__(self, loaded, options: TranscribeOptions, section: TransducerDecoding | None = None):
        section = section or section_for(loaded.decoding.family, options)
        defaults = loaded.decoding
        if defaults.blank_id is None:
            raise CapabilityError(f"this {loaded.architecture} bundle names no blank id; re-convert it")
        self.durations = tuple(defaults.options.get("durations", ()))
        self.beam_size = section.beam_size
        if self.beam_size > 1 and self.durations:
            # NeMo's TDT beam also searches over the durations of each label: not built here.
            raise CapabilityError(
                f"--beam-size {self.beam_size}: beam search over TDT durations is not implemented; this "
                f"{loaded.architecture} TDT model decodes greedily (--beam-size 1), or with --decoder ctc on a hybrid"
            )
        self.language = defaults.options.get("language", "")
        if options.language is not None and self.language and options.language != self.language:
            raise CapabilityError(f"this {loaded.architecture} model transcribes {self.language} only, not {options.language!r}")
        # A prompted model (Nemotron ASR) hears the language as a prompt slot; "auto": it detects it.
        self.encode_kwargs: dict = {}
        prompts = defaults.options.get("language_prompts")
        if prompts is not None:
            key = options.language or "auto"
            if key not in prompts:
                raise CapabilityError(f"this {loaded.architecture} model has no prompt for {key!r}; it knows: {', '.join(sorted(prompts))}")
            self.encode_kwargs = {"prompt_id": int(prompts[key])}
        self.loaded, self.options = loaded, options
        self.tokenizer = loaded.tokenizer()
        self.blank = defaults.blank_id
        self.max_symbols = section.max_symbols_per_step or defaults.options.get("max_symbols_per_step", 10)
        self.length = options.chunk_length or defaults.options.get("chunk_length", ctc.CHUNK_LENGTH)
        self.overlap = options.chunk_overlap if options.chunk_overlap is not None else defaults.options.get("chunk_overlap", ctc.CHUNK_OVERLAP)
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
            with torch.no_grad():
                encoded, enc_lengths = model.encode(padded.to(parameter.dtype), lengths, **self.encode_kwargs)
                if self.beam_size > 1:
                    hyps = beam_transducer(
                        model, encoded, enc_lengths, blank_id=self.blank, beam_size=self.beam_size, max_expansions=self.max_symbols
                    )
                    rows = [h.tokens for h in hyps]
                else:
                    rows = greedy_transducer(
                        model, encoded, enc_lengths, blank_id=self.blank, durations=self.durations, max_symbols=self.max_symbols
                    )
            for c, tokens in zip(batch, rows):
                spans = [(t.id, t.frame, t.frame + max(t.duration, 1), t.probability) for t in tokens]
                words += keep_own(ctc.words_from_tokens(self.tokenizer, spans, c.start / rate, frame_seconds), c)
            if progress is not None:
                done = batch[-1].own_end
                progress(min(speech_map.to_original(done) if speech_map else done, duration), duration)
        segments = to_segments(words, speech_map, duration, with_words=self.options.word_timestamps)
        return EngineOutput(segments, self.language if segments else "", None)
