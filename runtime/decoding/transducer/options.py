"""The options of the transducer decoding families (``rnnt``, ``tdt``), and their declaration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...errors import InputError
from ...options import _optional_range, check_range
from ..family import DecodingFamily

MAX_TRANSDUCER_BEAMS = 64  # RNN-T beam search, or the CTC head's prefix beam search
MAX_SYMBOLS_PER_STEP = 100  # labels a transducer may emit on one frame before it is moved on
TRANSDUCER_DECODERS = ("rnnt", "ctc")  # a hybrid model's heads: its transducer (RNN-T or TDT) or its CTC head


@dataclass(frozen=True)
class TransducerDecoding:
    """The decoding section of the transducer families (``rnnt``, ``tdt``)."""

    family: ClassVar[str] = "transducer"
    max_beam_size: ClassVar[int] = MAX_TRANSDUCER_BEAMS

    decoder: str = "rnnt"  # the transducer head; on a hybrid RNNT+CTC model "ctc" decodes with its CTC head instead
    max_symbols_per_step: int | None = None  # None: the model's own (NeMo's decoding.greedy.max_symbols)
    beam_size: int = 1  # greedy; above 1: RNN-T beam search (NeMo's "beam"), or CTC prefix beam search with decoder="ctc"

    def __post_init__(self):
        if self.decoder not in TRANSDUCER_DECODERS:
            raise InputError(f"unknown --decoder {self.decoder!r}; choose {' or '.join(TRANSDUCER_DECODERS)}")
        _optional_range(self.max_symbols_per_step, "--max-symbols-per-step", 1, MAX_SYMBOLS_PER_STEP, integer=True)
        check_range(self.beam_size, "--beam-size", 1, MAX_TRANSDUCER_BEAMS, integer=True)


FAMILY = DecodingFamily(
    options=TransducerDecoding,
    engine="oasr.pipelines.transcribe.transducer:Engine",
    verify="oasr.quant.verify:verify_transducer",
    can_do=(
        "greedy transducer decoding (--max-symbols-per-step), RNN-T beam search (--beam-size), --decoder ctc on hybrid "
        "models, chunking and word timestamps"
    ),
)
