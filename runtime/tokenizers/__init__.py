"""Tokenizers built from a TokenizerSpec and its asset files."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from ..errors import CapabilityError
from ..specs import TokenizerSpec


def load_tokenizer(spec: TokenizerSpec, files: Mapping[str, Path]):
    if spec.kind == "whisper":
        from .whisper import WhisperTokenizer

        return WhisperTokenizer.from_files(files, spec)
    if spec.kind == "none":
        raise CapabilityError("this model was converted without tokenizer assets; it cannot turn tokens into text")
    raise CapabilityError(f"unknown tokenizer kind {spec.kind!r}")
