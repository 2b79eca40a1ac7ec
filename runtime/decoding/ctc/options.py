"""The options of the ``ctc`` decoding family, and its declaration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...errors import InputError
from ...options import check_range
from ..family import DecodingFamily

MAX_CTC_BEAMS = 64  # prefix beam search keeps this many prefixes per frame (pure Python: cost grows linearly)


@dataclass(frozen=True)
class CtcDecoding:
    """The decoding section of the ``ctc`` family."""

    family: ClassVar[str] = "ctc"
    max_beam_size: ClassVar[int] = MAX_CTC_BEAMS

    beam_size: int = 1  # 1: greedy (best label per frame); above: CTC prefix beam search
    decoder: str = "ctc"  # the head: a CTC model has only this one (--decoder as on hybrid transducers)

    def __post_init__(self):
        check_range(self.beam_size, "--beam-size", 1, MAX_CTC_BEAMS, integer=True)
        if self.decoder != "ctc":
            raise InputError(f"--decoder {self.decoder}: a CTC model's heads: ctc only; it offers {CAN_DO}")


CAN_DO = "greedy decoding or prefix beam search (--beam-size), chunking and word timestamps"

FAMILY = DecodingFamily(
    options=CtcDecoding,
    engine="oasr.pipelines.transcribe.ctc:Engine",
    verify="oasr.quant.verify:verify_ctc",
    can_do=CAN_DO,
)
