"""The ``ctc`` engine: encoder-only models whose frames each give a distribution over labels.

A CTC model implements ``ctc_log_probs(features [B, C, T], lengths [B]) -> (log_probs [B, T', V],
lengths [B])`` and ``output_stride`` (feature frames per output frame); its bundle names the
blank (``DecodingDefaults.blank_id``) and, for single-language models, ``options["language"]``.
Its tokenizer gives ``token_text(id)``: the text a label adds, starting with a space where it
starts a word (a label that is only a space separates words). Long audio runs in overlapping
chunks (``chunked.py``), ``batch_size`` chunks per forward pass. ``CtcDecoding.beam_size`` above 1
decodes by prefix beam search.
"""

from __future__ import annotations

import torch

from ...decoding.ctc.options import CtcDecoding
from ...decoding.ctc.search import beam_ctc, greedy_ctc
from ...decoding.family import section_for
from ...options import TranscribeOptions
from .chunked import ChunkedEngine, Span


class Engine(ChunkedEngine):
    blank_name = "CTC blank id"

    def __init__(self, loaded, options: TranscribeOptions, section: CtcDecoding | None = None):
        section = section or section_for(loaded.decoding.family, options)
        self.beam_size = section.beam_size
        super().__init__(loaded, options)

    def decode(self, features: torch.Tensor, lengths: torch.Tensor) -> list[list[Span]]:
        log_probs, out_lengths = self.loaded.model.ctc_log_probs(features, lengths)
        rows = []
        for lp, n in zip(log_probs, out_lengths.tolist()):
            tokens = greedy_ctc(lp[:n], self.blank) if self.beam_size == 1 else beam_ctc(lp[:n], self.blank, self.beam_size)
            rows.append([(t.id, t.first_frame, t.last_frame + 1, t.probability) for t in tokens])
        return rows
