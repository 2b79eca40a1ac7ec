"""The converter contract every foreign format implements.

A converter states only positive markers of its own format (``detect``); the resolver ranks the
claims by ``detect_specificity``. It never guards against another format: a tie is the
resolver's to report, and ``--architecture`` settles it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Collection, Mapping

from ..specs import ConvertedCheckpoint, DecodingDefaults, FeatureSpec, Provenance, TokenizerSpec
from .tensor_map import TensorTable

if TYPE_CHECKING:
    from torch import Tensor

DETECT_KEYED_VALUE = 30  # a config field names the architecture (config.json model_type, a header)
DETECT_NAMED_CONFIG = 20  # a framework's own config file or structure identifies the framework
DETECT_ASSET_LAYOUT = 10  # file names and layout only

_REQUIRED = ("name", "architecture", "markers", "tensor_table")


class CheckpointConverter:
    """Base class; subclasses are found through the ``oasr.converters`` entry-point group."""

    name: ClassVar[str]  # what --architecture accepts besides the architecture, e.g. "ctranslate2"
    architecture: ClassVar[str]  # model registry key, e.g. "whisper"
    markers: ClassVar[str]  # what detect() looks for, in words (shown when nothing matches)
    tensor_table: ClassVar[TensorTable]
    detect_specificity: ClassVar[int] = DETECT_ASSET_LAYOUT
    expected_unused_prefixes: ClassVar[tuple[str, ...]] = ()  # source tensors allowed to be dropped
    capability_drop_hints: ClassVar[Mapping[str, str]] = {}  # source prefix -> what dropping it loses
    requires: ClassVar[Mapping[str, str]] = {}  # optional package it reads with -> the extra installing it

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        missing = [a for a in _REQUIRED if not hasattr(cls, a)]
        if missing:
            raise TypeError(f"converter {cls.__name__} must declare {', '.join(missing)}")

    def __init__(self, path: Path):
        self.path = Path(path)

    @classmethod
    def detect(cls, path: Path) -> str | None:
        """The reason this converter claims ``path`` (its own markers, found), or None."""
        raise NotImplementedError

    def source_files(self) -> list[Path]:
        """Weight files whose sha256 identifies the source (provenance and up-to-date checks)."""
        raise NotImplementedError

    def source_hashes(self) -> dict[str, str]:
        """sha256 of each source file, by name. A converter that maps a file whole may hash it
        as it maps it, so that conversion reads it once."""
        from ..io.files import sha256_file

        return {p.name: sha256_file(p) for p in self.source_files()}

    def build_config(self) -> Any:
        raise NotImplementedError

    def build_aux(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self) -> dict[str, Tensor]:
        """Source-format tensors on the CPU (torch tensors, or numpy arrays: ``arrays``); the
        tensor table maps their names."""
        raise NotImplementedError

    def layout(self, config: Any) -> Any | None:
        """The model's stored tensors, computed buffers and capabilities without torch (as
        ``oasr.models.whisper_config.WhisperLayout``), or None: conversion builds the meta model."""
        return None

    def build_specs(self, config: Any) -> tuple[TokenizerSpec, dict[str, Path], FeatureSpec, DecodingDefaults]:
        """Tokenizer spec and its asset files (bundle name -> source path), features, decoding."""
        raise NotImplementedError

    def notes(self) -> list[str]:
        """Warnings for the user about this source (e.g. no tokenizer beside a checkpoint)."""
        return []

    def convert(self, hashes: Mapping[str, str] | None = None) -> ConvertedCheckpoint:
        """Everything needed to build the model, with provenance (sha256 of the source files)."""
        from .. import __version__

        if hashes is None:
            hashes = self.source_hashes()
        config = self.build_config()
        tokenizer, tokenizer_files, features, decoding = self.build_specs(config)
        return ConvertedCheckpoint(
            architecture=self.architecture,
            model_config=config,
            state_dict=self.load_state_dict(),
            tokenizer=tokenizer,
            features=features,
            decoding=decoding,
            provenance=Provenance(
                source_format=self.name, source_files=dict(hashes), oasr_version=__version__, source=str(self.path)
            ),
            aux=self.build_aux(),
            tokenizer_files=tokenizer_files,
            notes=self.notes(),
        )


def detect_hf_model_type(path: Path, model_types: Collection[str]) -> str | None:
    """A Hugging Face folder's detection reason when its config.json names one of ``model_types``;
    None for anything else, an unreadable or malformed config included."""
    config = Path(path) / "config.json"
    if not config.is_file():
        return None
    try:
        model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (ValueError, UnicodeDecodeError, AttributeError, RecursionError, OSError):
        return None
    return f"config.json: model_type={model_type}" if model_type in model_types else None
