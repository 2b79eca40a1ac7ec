"""The options of the ``aed`` decoding family, and its declaration.

The defaults are WeNet's ``recognize.py``: beam 10, ``ctc_weight`` 0.0 and ``reverse_weight``
0.0; the mode is attention rescoring when the bundle has an attention decoder, CTC prefix beam
search otherwise (``mode=auto``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...errors import InputError
from ...options import check_range
from ..family import DecodingFamily

MAX_AED_BEAMS = 64
MODES = ("auto", "ctc_greedy_search", "ctc_prefix_beam_search", "attention", "attention_rescoring")
ATTENTION_MODES = ("attention", "attention_rescoring")


@dataclass(frozen=True)
class AedDecoding:
    """The decoding section of the ``aed`` family."""

    family: ClassVar[str] = "aed"
    max_beam_size: ClassVar[int] = MAX_AED_BEAMS

    mode: str = "auto"  # one of MODES (WeNet's --modes names)
    beam_size: int = 10  # prefix beam and attention beam width, and the n-best that rescoring reads
    ctc_weight: float = 0.0  # rescoring: weight of the CTC prefix score beside the decoder's
    reverse_weight: float = 0.0  # rescoring: weight of U2++'s right-to-left decoder (0: left only)
    length_penalty: float = 0.0  # attention beam: scores divided by length ** this

    def __post_init__(self):
        if self.mode not in MODES:
            raise InputError(f"--decoding-option mode={self.mode}: one of {', '.join(MODES)}")
        check_range(self.beam_size, "--beam-size", 1, MAX_AED_BEAMS, integer=True)
        check_range(self.ctc_weight, "--decoding-option ctc_weight", 0.0)
        check_range(self.reverse_weight, "--decoding-option reverse_weight", 0.0, 1.0)
        check_range(self.length_penalty, "--decoding-option length_penalty", 0.0)

    def resolved_mode(self, decoder: str) -> str:
        """The mode for a bundle whose attention branch is ``decoder`` ("" : none)."""
        if self.mode == "auto":
            return "attention_rescoring" if decoder else "ctc_prefix_beam_search"
        return self.mode


CAN_DO = (
    "modes (--decoding-option mode=...) ctc_greedy_search, ctc_prefix_beam_search, attention and "
    "attention_rescoring (ctc_weight, reverse_weight), --beam-size, chunking and word timestamps"
)

FAMILY = DecodingFamily(
    options=AedDecoding,
    engine="oasr.pipelines.transcribe.aed:Engine",
    verify="oasr.decoding.aed.verify:verify_aed",
    can_do=CAN_DO,
)
