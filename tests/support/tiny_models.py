"""Tiny random Whisper checkpoints in each foreign format, built in a few milliseconds."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import torch

TINY_DIMS = dict(
    n_mels=80, n_audio_ctx=16, n_audio_state=32, n_audio_head=2, n_audio_layer=2,
    n_vocab=64, n_text_ctx=8, n_text_state=32, n_text_head=2, n_text_layer=2,
)


def tiny_whisper_state(seed: int = 0, **dims) -> tuple[dict, dict]:
    """(dims, openai-named state dict) of a random tiny Whisper, fp32."""
    from oasr.models.whisper import Whisper, WhisperConfig, sinusoids

    d = {**TINY_DIMS, **dims}
    torch.manual_seed(seed)
    model = Whisper(WhisperConfig(**d))
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.2)
    model.encoder.positional_embedding.copy_(sinusoids(d["n_audio_ctx"], d["n_audio_state"]))
    return d, {k: v.clone() for k, v in model.state_dict().items()}


def write_openai_pt(path: Path, seed: int = 0, **dims) -> Path:
    d, state = tiny_whisper_state(seed, **dims)
    torch.save({"dims": d, "model_state_dict": state}, path)
    return path


def write_ct2_header(folder: Path, spec: str = "WhisperSpec") -> None:
    """Just enough of a CTranslate2 directory for detection (a model.bin header, config, tokenizer)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = spec.encode() + b"\0"
    (folder / "model.bin").write_bytes(struct.pack("<IH", 6, len(name)) + name + struct.pack("<II", 3, 0) + struct.pack("<I", 0))
    (folder / "config.json").write_text("{}")
    (folder / "vocabulary.txt").write_text("a\n")


def write_hf_config(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "whisper"}))


def write_hf_config_full(folder: Path, **overrides) -> None:
    """A complete transformers Whisper config.json for the TINY_DIMS shapes."""
    folder.mkdir(parents=True, exist_ok=True)
    d = TINY_DIMS
    config = {
        "model_type": "whisper",
        "d_model": d["n_audio_state"],
        "num_mel_bins": d["n_mels"],
        "max_source_positions": d["n_audio_ctx"],
        "encoder_attention_heads": d["n_audio_head"],
        "encoder_layers": d["n_audio_layer"],
        "vocab_size": d["n_vocab"],
        "max_target_positions": d["n_text_ctx"],
        "decoder_attention_heads": d["n_text_head"],
        "decoder_layers": d["n_text_layer"],
        **overrides,
    }
    (folder / "config.json").write_text(json.dumps(config))
