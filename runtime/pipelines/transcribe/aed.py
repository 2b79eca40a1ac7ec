"""The ``aed`` engine: hybrid CTC / attention models (WeNet U2 / U2++, icefall Zipformer with its
attention decoder), over the shared chunking.

The model gives ``encode(features [B, F, T], lengths) -> (encoded [B, T', C], lengths)``,
``ctc_log_probs_of(encoded) -> [B, T', V]`` (``ctc_logits`` for quantize --verify),
``output_stride``, ``has_decoder``, and the decoder methods ``oasr.decoding.aed.search`` names;
the bundle names the blank, ``<sos>`` and ``<eos>`` (``DecodingDefaults``) and its decoder
(``options["decoder"]``). Each chunk is decoded on its own by the section's mode; word times
come from the CTC alignment (the prefix beam's peak frames, greedy runs, or a forced alignment of
the attention beam's tokens).
"""

from __future__ import annotations

import logging
import math

import torch

from ...decoding.aed.options import ATTENTION_MODES, AedDecoding
from ...decoding.aed.search import attention_beam_search, attention_rescoring, ctc_forced_alignment, ctc_prefix_beam_search
from ...decoding.ctc.search import greedy_ctc
from ...decoding.family import section_for
from ...errors import CapabilityError
from ...options import TranscribeOptions
from .chunked import ChunkedEngine, Span

log = logging.getLogger("oasr")


class Engine(ChunkedEngine):
    blank_name = "CTC blank id"

    def __init__(self, loaded, options: TranscribeOptions, section: AedDecoding | None = None):
        section = section or section_for(loaded.decoding.family, options)
        decoder = loaded.decoding.options.get("decoder", "")
        self.mode = section.resolved_mode(decoder)
        if self.mode in ATTENTION_MODES and not getattr(loaded.model, "has_decoder", False):
            raise CapabilityError(
                f"--decoding-option mode={self.mode}: this {loaded.architecture} bundle has no attention decoder "
                "(converted without it); it decodes with ctc_greedy_search or ctc_prefix_beam_search"
            )
        if section.reverse_weight > 0 and self.mode == "attention_rescoring" and not loaded.model.has_reverse_decoder:
            raise CapabilityError("--decoding-option reverse_weight: this model has no right-to-left decoder (a U2 model, not U2++)")
        if section.mode == "auto":
            log.info("aed decoding mode: %s (--decoding-option mode=... chooses)", self.mode)
        self.section = section
        super().__init__(loaded, options)
        self.sos, self.eos = loaded.decoding.bos_id, loaded.decoding.eos_id
        if self.mode in ATTENTION_MODES and (self.sos is None or self.eos is None):
            raise CapabilityError(f"this {loaded.architecture} bundle names no <sos>/<eos> ids; re-convert it")

    def decode(self, features: torch.Tensor, lengths: torch.Tensor) -> list[list[Span]]:
        model = self.loaded.model
        encoded, out_lengths = model.encode(features, lengths)
        log_probs = model.ctc_log_probs_of(encoded)
        return [self._one(encoded[i : i + 1, :n], log_probs[i, :n]) for i, n in enumerate(out_lengths.tolist())]

    def _one(self, encoded: torch.Tensor, lp: torch.Tensor) -> list[Span]:
        s, model = self.section, self.loaded.model
        if self.mode == "ctc_greedy_search":
            return [(t.id, t.first_frame, t.last_frame + 1, t.probability) for t in greedy_ctc(lp, self.blank)]
        if self.mode == "attention":
            tokens = attention_beam_search(model, encoded, self.sos, self.eos, s.beam_size, s.length_penalty)
            spans = ctc_forced_alignment(lp.cpu(), tokens, self.blank)
            return [(tok, a, b + 1, math.exp(float(lp[a : b + 1, tok].max()))) for tok, (a, b) in zip(tokens, spans)]
        nbest = ctc_prefix_beam_search(lp.cpu(), self.blank, s.beam_size)
        if self.mode == "ctc_prefix_beam_search" or not nbest:
            best = nbest[0] if nbest else None
            return [] if best is None else [(tok, t, t + 1, math.exp(float(lp[t, tok]))) for tok, t in zip(best.tokens, best.times)]
        chosen = attention_rescoring(model, encoded, nbest, self.sos, self.eos, s.ctc_weight, s.reverse_weight)
        best = nbest[chosen.index]
        return [(tok, t, t + 1, p) for tok, t, p in zip(best.tokens, best.times, chosen.token_probs)]
