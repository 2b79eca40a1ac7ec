"""TokenizerSpec, FeatureSpec and DecodingDefaults of a WeNet bundle."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from ...specs import DecodingDefaults, FeatureSpec, TokenizerSpec
from .config import WenetConfig


def wenet_specs(config: WenetConfig, tokenizer_files: Mapping[str, Path]) -> tuple[TokenizerSpec, FeatureSpec, DecodingDefaults]:
    """The ``aed`` family; ``options["decoder"]`` says which attention branch the bundle has
    (``""``, ``"transformer"``, ``"bitransformer"``), which picks the default mode."""
    features = FeatureSpec(
        kind="wenet_fbank",
        sample_rate=config.sample_rate,
        n_mels=config.n_mels,
        n_fft=int(config.sample_rate * config.frame_length_ms / 1000),
        hop_length=int(config.sample_rate * config.frame_shift_ms / 1000),
        chunk_seconds=0.0,
        audio_scale=float(1 << 15),
        options={"frame_length_ms": config.frame_length_ms, "frame_shift_ms": config.frame_shift_ms},
    )
    decoding = DecodingDefaults(
        family="aed", bos_id=config.sos, eos_id=config.eos, blank_id=config.blank_id, options={"decoder": config.decoder}
    )
    if not tokenizer_files:
        return TokenizerSpec(kind="none"), features, decoding
    tokenizer = TokenizerSpec(kind="wenet_units", files=tuple(sorted(tokenizer_files)), options={"vocab_size": config.vocab_size})
    return tokenizer, features, decoding
