"""Synthesized speech as written: each a ``Format`` of the result type ``speech`` whose writer is
``fn(binary file, sample_rate, tags) -> PcmWriter`` (``wav.py``), fed chunk by chunk as it streams.
wav.py (and numpy) is imported when a writer is opened, not when the formats are listed.
"""

from __future__ import annotations

from typing import BinaryIO, Mapping

from .registry import Format


def _wav(out: BinaryIO, sample_rate: int, tags: Mapping[str, str]):
    from .wav import PcmWriter

    return PcmWriter(out, sample_rate, tags)


def _raw(out: BinaryIO, sample_rate: int, tags: Mapping[str, str]):
    from .wav import PcmWriter

    return PcmWriter(out, sample_rate, tags, raw=True)


# The entry points of oasr.formats.speech (pyproject): wav first, the listing order of -F.
WAV = Format(_wav, rank=10)
RAW = Format(_raw, rank=20)
