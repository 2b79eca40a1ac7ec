"""Plain data that travels with a model: tokenizer, features, decoding defaults, load accounting.

Each spec is a frozen dataclass with ``to_dict``/``from_dict`` so it is written into
``oasr_config.json`` as plain JSON and read back strictly (unknown or missing fields raise).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .errors import BundleError


class _Spec:
    """Strict JSON round trip shared by every spec dataclass."""

    def to_dict(self) -> dict[str, Any]:
        return _plain(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = ""):
        if not isinstance(data, Mapping):
            raise BundleError(f"{where or cls.__name__}: expected an object, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        required = {
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        unknown = sorted(set(data) - names)
        missing = sorted(required - set(data))
        label = where or cls.__name__
        if missing:
            raise BundleError(f"{label} is missing field(s): {', '.join(missing)}")
        if unknown:
            raise BundleError(f"{label} has unknown field(s): {', '.join(unknown)}")
        types = {f.name: str(f.type) for f in dataclasses.fields(cls)}
        for key, value in data.items():
            if not _fits(value, types[key]):
                raise BundleError(f"{label}: {key} must be {types[key]}, not {type(value).__name__}")
        values = {k: tuple(v) if isinstance(v, list) and _is_tuple_field(cls, k) else v for k, v in data.items()}
        return cls(**values)


def _fits(value, annotation: str) -> bool:
    """Whether a JSON value has the type a field's annotation names (the forms specs use)."""
    for kind in (a.strip() for a in annotation.split("|")):
        if kind == "Any" or (kind == "None" and value is None):
            return True
        if kind == "str" and isinstance(value, str):
            return True
        if kind == "bool" and isinstance(value, bool):
            return True
        if kind in ("int", "float") and isinstance(value, (int, float)) and not isinstance(value, bool):
            if kind == "float" or isinstance(value, int):
                return True
        if kind.startswith("tuple[str") and isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return True
        if kind.startswith("dict[") and isinstance(value, dict):
            return True
    return False


def _is_tuple_field(cls, name: str) -> bool:
    for f in dataclasses.fields(cls):
        if f.name == name:
            return "tuple" in str(f.type)
    return False


def _plain(value):
    """Tuples become lists so the dict equals what JSON gives back."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class TokenizerSpec(_Spec):
    kind: str  # "whisper"
    files: tuple[str, ...] = ()  # asset names inside the bundle's tokenizer/ folder
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FeatureSpec(_Spec):
    kind: str  # "whisper_logmel"
    sample_rate: int = 16000
    n_mels: int = 80
    n_fft: int = 400
    hop_length: int = 160
    chunk_seconds: float = 30.0  # fixed input window of the model, 0 for streaming models
    audio_scale: float = 1.0  # samples are floats in [-1, 1] times this
    options: dict[str, Any] = field(default_factory=dict)  # kind-specific: window, preemphasis, log guard, normalisation


@dataclass(frozen=True)
class DecodingDefaults(_Spec):
    family: str  # "whisper_seq2seq"
    bos_id: int | None = None  # start of transcript
    eos_id: int | None = None
    blank_id: int | None = None
    options: dict[str, Any] = field(default_factory=dict)  # family-specific: suppress ids, alignment heads


@dataclass(frozen=True)
class Provenance(_Spec):
    source_format: str  # converter name, or "native"
    source_files: dict[str, str] = field(default_factory=dict)  # file name -> sha256
    oasr_version: str = ""
    source: str = ""  # what the user pointed at, for display only
    options: dict[str, Any] = field(default_factory=dict)  # conversion options (dtype) for up-to-date checks
    dropped: tuple[str, ...] = ()  # source tensors the conversion left unused (allowed, or a capability hint)


@dataclass
class LoadReport:
    """What happened to every source tensor and every model tensor during a load."""

    mapped: list[str] = field(default_factory=list)  # source names that filled a model tensor
    dropped: list[str] = field(default_factory=list)  # source names left unused (by the conversion, for a converted bundle)
    missing: list[str] = field(default_factory=list)  # model tensors nothing filled

    def to_dict(self) -> dict[str, list[str]]:
        return {"mapped": list(self.mapped), "dropped": list(self.dropped), "missing": list(self.missing)}


@dataclass
class ConvertedCheckpoint:
    """Everything a converter extracted from a foreign source, before any model exists."""

    architecture: str
    model_config: Any  # the architecture's config dataclass
    state_dict: dict[str, Any]  # source-format names; the converter's table maps them
    tokenizer: TokenizerSpec
    features: FeatureSpec
    decoding: DecodingDefaults
    provenance: Provenance
    aux: dict[str, Any] = field(default_factory=dict)
    tokenizer_files: dict[str, Path] = field(default_factory=dict)  # bundle asset name -> source file
    notes: list[str] = field(default_factory=list)  # things the user should know (logged as warnings)
