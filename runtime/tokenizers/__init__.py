"""Tokenizers built from a TokenizerSpec and its asset files, chosen by the spec's kind.

Each kind is an ``oasr.tokenizers`` entry point: ``fn(files, spec) -> tokenizer``. A tokenizer
turns ids into text (``decode``) and text into ids (``encode``); families add what they need
(Whisper's special tokens, a CTC blank).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from .. import plugins
from ..errors import CapabilityError
from ..specs import TokenizerSpec


def load_tokenizer(spec: TokenizerSpec, files: Mapping[str, Path]):
    if spec.kind == "none":
        raise CapabilityError("this model was converted without tokenizer assets; it cannot turn tokens into text")
    return plugins.load("oasr.tokenizers", spec.kind, "tokenizer kind")(files, spec)
