"""The options of the ``cif`` decoding family, and its declaration.

A CIF model decodes in one forward: the predictor fixes how many tokens there are and the
decoder gives each its best label, so there is nothing to search. (FunASR searches beams over
the decoder's output only with a CTC head or a language model joined in; neither is built.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..family import DecodingFamily


@dataclass(frozen=True)
class CifDecoding:
    """The decoding section of the ``cif`` family: no options of its own."""

    family: ClassVar[str] = "cif"


CAN_DO = "one forward per chunk (the best label per predicted token, no beam search), chunking and word timestamps"

FAMILY = DecodingFamily(
    options=CifDecoding,
    engine="oasr.pipelines.transcribe.cif:Engine",
    verify="oasr.decoding.cif.verify:verify_cif",
    can_do=CAN_DO,
)
