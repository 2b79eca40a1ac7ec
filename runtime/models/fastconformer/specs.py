"""TokenizerSpec, FeatureSpec and DecodingDefaults every FastConformer source shares."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Mapping

from ...features.nemo_mel import nemo_feature_spec
from ...specs import DecodingDefaults, FeatureSpec, TokenizerSpec
from .config import FastConformerConfig


def fastconformer_specs(
    config: FastConformerConfig,
    tokenizer_files: Mapping[str, Path],
    *,
    tokenizer_kind: str = "tokenizer_json",
    language: str | None = None,
) -> tuple[TokenizerSpec, FeatureSpec, DecodingDefaults]:
    """The decoding family is the head's (``ctc``, ``rnnt``, ``tdt``); a hybrid also names its CTC
    head (``options["ctc_head"]``) so ``decoder="ctc"`` can pick it. The front end is NeMo's
    mel (``nemo_logmel``), its settings in the model config's ``preprocessor``."""
    features = nemo_feature_spec(dataclasses.asdict(config.preprocessor))
    options: dict = {}
    if language:
        options["language"] = language
    if config.hybrid_ctc:
        options["ctc_head"] = True
    if config.head != "ctc":
        options["max_symbols_per_step"] = config.max_symbols_per_step
    if config.durations:
        options["durations"] = list(config.durations)
    decoding = DecodingDefaults(family=config.head, blank_id=config.blank_id, options=options)
    if not tokenizer_files:
        return TokenizerSpec(kind="none"), features, decoding
    tokenizer = TokenizerSpec(kind=tokenizer_kind, files=tuple(sorted(tokenizer_files)), options={"blank_id": config.blank_id})
    return tokenizer, features, decoding
