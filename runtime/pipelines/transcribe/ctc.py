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

import dataclasses

import torch

from ...decoding.ctc import beam_ctc, greedy_ctc
from ...errors import CapabilityError
from ...options import CtcDecoding, TranscribeOptions, TransducerDecoding, WhisperDecoding
from .chunked import CHUNK_LENGTH, ChunkedEngine, Span  # noqa: F401 (CHUNK_LENGTH: quant.verify reads it here)


def refuse_foreign_section(options: TranscribeOptions, family: str, accepted: type, can_do: str) -> None:
    """A section of another family (Whisper's temperature fallback, prompts) is refused, naming the
    flags this family cannot honour and what it can do instead; it is never silently ignored. A
    Whisper section that sets nothing but ``beam_size`` is the shared ``--beam-size`` flag, which
    ``beam_size_asked`` reads."""
    d = options.decoding
    if d is None or isinstance(d, accepted) or not foreign_fields(d):
        return
    flags = ", ".join(f"--{name.replace('_', '-')}" for name in foreign_fields(d))
    raise CapabilityError(
        f"{flags} ({type(d).__name__} options of the {d.family} family) cannot be honoured: this model decodes "
        f"as the {family} family, which offers {can_do}"
    )


def foreign_fields(section) -> list[str]:
    """The fields of a WhisperDecoding set away from their defaults, but for ``beam_size``. A
    CtcDecoding holds nothing but the shared beam size (the CLI's --beam-size past Whisper's range)."""
    if isinstance(section, CtcDecoding):
        return []
    if not isinstance(section, WhisperDecoding):
        return [f.name for f in dataclasses.fields(section)]
    defaults = WhisperDecoding()
    names = [f.name for f in dataclasses.fields(section) if f.name != "beam_size"]
    return ["temperature" if n == "temperatures" else n for n in names if getattr(section, n) != getattr(defaults, n)]


def beam_size_asked(options: TranscribeOptions) -> int | None:
    """The beam size of a Whisper or CTC section that asks for nothing else (the shared --beam-size)."""
    d = options.decoding
    return d.beam_size if isinstance(d, (WhisperDecoding, CtcDecoding)) and not foreign_fields(d) else None


CTC_CAN_DO = "greedy decoding or prefix beam search (--beam-size), chunking and word timestamps"


class Engine(ChunkedEngine):
    blank_name = "CTC blank id"

    def __init__(self, loaded, options: TranscribeOptions, section: CtcDecoding | None = None):
        if section is None:
            section = _ctc_section(loaded, options)
        self.beam_size = section.beam_size
        super().__init__(loaded, options)

    def decode(self, features: torch.Tensor, lengths: torch.Tensor) -> list[list[Span]]:
        log_probs, out_lengths = self.loaded.model.ctc_log_probs(features, lengths)
        rows = []
        for lp, n in zip(log_probs, out_lengths.tolist()):
            tokens = greedy_ctc(lp[:n], self.blank) if self.beam_size == 1 else beam_ctc(lp[:n], self.blank, self.beam_size)
            rows.append([(t.id, t.first_frame, t.last_frame + 1, t.probability) for t in tokens])
        return rows


def _ctc_section(loaded, options: TranscribeOptions) -> CtcDecoding:
    """The CTC section of ``options``: its own, a --beam-size, or --decoder ctc (the only head)."""
    d = options.decoding
    if isinstance(d, TransducerDecoding):
        if d.decoder != "ctc" or d.max_symbols_per_step is not None:
            flag = f"--decoder {d.decoder}" if d.decoder != "ctc" else "--max-symbols-per-step"
            raise CapabilityError(f"{flag}: this {loaded.architecture} model's heads: ctc only; it offers {CTC_CAN_DO}")
        return CtcDecoding(d.beam_size)
    refuse_foreign_section(options, "ctc", CtcDecoding, CTC_CAN_DO)
    beam = beam_size_asked(options)
    if beam is not None:
        return CtcDecoding(beam)
    return d or CtcDecoding()
