"""The ``rnnt`` and ``tdt`` engines: transducer models decoded greedily by batched label looping,
or (RNN-T, ``TransducerDecoding.beam_size`` above 1) by NeMo's beam search; a stateless decoder
(icefall's, whose bundle names its ``context_size``) by icefall's modified beam search.

The model gives ``encode``, ``project_encoder``, ``predict`` and ``joint_logits`` (see
``oasr.decoding.transducer``); its bundle names the blank (``DecodingDefaults.blank_id``), TDT
``durations`` and ``max_symbols_per_step``. A token's time is its emitting frame; TDT tokens span
their predicted duration, RNN-T tokens one frame (the subsampled hop). Long audio runs in
overlapping chunks (``chunked.py``), ``batch_size`` chunks per encoder pass. A hybrid RNNT+CTC
model (``options["ctc_head"]``) decodes with its CTC head given ``TransducerDecoding(decoder="ctc")``.
"""

from __future__ import annotations

import dataclasses

import torch

from ...decoding.ctc.options import CtcDecoding
from ...decoding.family import section_for
from ...decoding.transducer.options import TransducerDecoding
from ...decoding.transducer.modified_beam import modified_beam_search
from ...decoding.transducer.search import beam_transducer, greedy_transducer
from ...errors import CapabilityError
from ...options import TranscribeOptions
from . import ctc
from .chunked import ChunkedEngine, Span


def heads(loaded) -> str:
    """The decoders a transducer bundle offers, as --decoder names them."""
    return "rnnt and ctc" if loaded.decoding.options.get("ctc_head") else "rnnt only"


class Engine(ChunkedEngine):
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
        self.durations = tuple(defaults.options.get("durations", ()))
        self.beam_size = section.beam_size
        if self.beam_size > 1 and self.durations:
            # NeMo's TDT beam also searches over the durations of each label: not built here.
            raise CapabilityError(
                f"--beam-size {self.beam_size}: beam search over TDT durations is not implemented; this "
                f"{loaded.architecture} TDT model decodes greedily (--beam-size 1), or with --decoder ctc on a hybrid"
            )
        super().__init__(loaded, options)
        # A prompted model (Nemotron ASR) hears the language as a prompt slot; "auto": it detects it.
        self.encode_kwargs: dict = {}
        prompts = defaults.options.get("language_prompts")
        if prompts is not None:
            key = options.language or "auto"
            if key not in prompts:
                raise CapabilityError(f"this {loaded.architecture} model has no prompt for {key!r}; it knows: {', '.join(sorted(prompts))}")
            self.encode_kwargs = {"prompt_id": int(prompts[key])}
        self.max_symbols = section.max_symbols_per_step or defaults.options.get("max_symbols_per_step", 10)
        # A stateless decoder (icefall's) names its label context: its beam is icefall's modified beam search.
        self.context_size = int(defaults.options.get("context_size", 0))

    def decode(self, features: torch.Tensor, lengths: torch.Tensor) -> list[list[Span]]:
        model = self.loaded.model
        with torch.no_grad():
            encoded, enc_lengths = model.encode(features, lengths, **self.encode_kwargs)
            if self.beam_size > 1 and self.context_size:
                hyps = modified_beam_search(
                    model, encoded, enc_lengths, blank_id=self.blank, beam_size=self.beam_size, context_size=self.context_size
                )
                rows = [h.tokens for h in hyps]
            elif self.beam_size > 1:
                hyps = beam_transducer(
                    model, encoded, enc_lengths, blank_id=self.blank, beam_size=self.beam_size, max_expansions=self.max_symbols
                )
                rows = [h.tokens for h in hyps]
            else:
                rows = greedy_transducer(
                    model, encoded, enc_lengths, blank_id=self.blank, durations=self.durations, max_symbols=self.max_symbols
                )
        return [[(t.id, t.frame, t.frame + max(t.duration, 1), t.probability) for t in tokens] for tokens in rows]
