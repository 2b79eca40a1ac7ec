"""The native bundle: ``oasr_config.json`` + ``model.safetensors`` + ``tokenizer/``.

Format version 1 is full precision; version 2 adds a ``quantization`` section (written by
``oasr quantize``). Readers accept both and refuse anything else by name.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from safetensors import SafetensorError, safe_open

from ..errors import BundleError
from .files import atomic_directory, inside, name_problem, sha256_file
from .safetensors_file import write_safetensors
from ..specs import DecodingDefaults, FeatureSpec, Provenance, TokenizerSpec

if TYPE_CHECKING:
    import torch

CONFIG_NAME = "oasr_config.json"
WEIGHTS_NAME = "model.safetensors"
TOKENIZER_DIR = "tokenizer"
FORMAT_VERSION = 1
READABLE_VERSIONS = (1, 2)


@dataclass(frozen=True)
class BundleConfig:
    architecture: str
    model: dict[str, Any]  # the architecture's config dataclass as JSON
    dtype: str  # floating dtype of the stored weights
    tokenizer: TokenizerSpec
    features: FeatureSpec
    decoding: DecodingDefaults
    provenance: Provenance
    capabilities: tuple[str, ...] = ()
    aux: dict[str, Any] = field(default_factory=dict)
    quantization: dict[str, Any] | None = None
    format_version: int = FORMAT_VERSION

    def to_json(self) -> str:
        data = {
            "format_version": self.format_version,
            "architecture": self.architecture,
            "dtype": self.dtype,
            "capabilities": sorted(self.capabilities),
            "model": self.model,
            "tokenizer": self.tokenizer.to_dict(),
            "features": self.features.to_dict(),
            "decoding": self.decoding.to_dict(),
            "provenance": self.provenance.to_dict(),
            "aux": self.aux,
        }
        if self.quantization is not None:
            data["quantization"] = self.quantization
        return json.dumps(data, indent=2) + "\n"


_REQUIRED = ("format_version", "architecture", "dtype", "model", "tokenizer", "features", "decoding", "provenance")


def is_bundle(path: Path) -> bool:
    return (Path(path) / CONFIG_NAME).is_file()


def existing_config(path: Path) -> BundleConfig | None:
    """The config of a readable bundle at ``path`` with its weights file, else None (up-to-date checks)."""
    if not is_bundle(path) or not (Path(path) / WEIGHTS_NAME).is_file():
        return None
    try:
        return read_config(path)
    except BundleError:
        return None


def read_config(path: Path) -> BundleConfig:
    file = Path(path) / CONFIG_NAME
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise BundleError(f"{path} is not an oasr bundle: no {CONFIG_NAME}") from e
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise BundleError(f"{file} is not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise BundleError(f"{file}: expected a JSON object")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise BundleError(f"{file} is missing field(s): {', '.join(missing)}")
    version = data["format_version"]
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise BundleError(
            f"{file}: format_version {version!r} is not supported by this oasr "
            f"(reads {', '.join(map(str, READABLE_VERSIONS))}); upgrade oasr or re-convert the source"
        )
    quantization = data.get("quantization")
    if version == 2 and not isinstance(quantization, dict):
        raise BundleError(f"{file}: format_version 2 requires a quantization section")
    if version == 1 and quantization is not None:
        raise BundleError(f"{file}: a quantization section needs format_version 2")
    if quantization is not None:
        from ..quant.section import QuantizationSpec

        QuantizationSpec.from_dict(quantization, where=f"{file} quantization")
    known = set(_REQUIRED) | {"capabilities", "aux", "quantization"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise BundleError(f"{file} has unknown field(s): {', '.join(unknown)}")
    if not isinstance(data["model"], dict):
        raise BundleError(f"{file}: model must be an object")
    if not isinstance(data.get("aux", {}), dict):
        raise BundleError(f"{file}: aux must be an object")
    capabilities = data.get("capabilities", [])
    if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
        raise BundleError(f"{file}: capabilities must be a list of names")
    tokenizer = TokenizerSpec.from_dict(data["tokenizer"], where=f"{file} tokenizer")
    for name in tokenizer.files:
        problem = name_problem(name, nested=False)
        if problem is not None:
            raise BundleError(
                f"{file}: the tokenizer file {name!r} {problem}; an asset is a plain name inside {TOKENIZER_DIR}/"
            )
    return BundleConfig(
        format_version=version,
        architecture=str(data["architecture"]),
        model=data["model"],
        dtype=str(data["dtype"]),
        tokenizer=tokenizer,
        features=FeatureSpec.from_dict(data["features"], where=f"{file} features"),
        decoding=DecodingDefaults.from_dict(data["decoding"], where=f"{file} decoding"),
        provenance=Provenance.from_dict(data["provenance"], where=f"{file} provenance"),
        capabilities=tuple(data.get("capabilities", ())),
        aux=dict(data.get("aux") or {}),
        quantization=quantization,
    )


def read_tensors(path: Path, convert=None) -> dict[str, torch.Tensor]:
    """All stored tensors, on the CPU in their stored dtype, read through safetensors' mmap.
    ``convert(name, tensor)``: applied to each as it is read (a cast); what it returns uncast stays
    a view of the file's mapping, never copied, and a cast tensor's source pages are given back
    once it is made (``oasr.io.mapped``)."""
    file = Path(path) / WEIGHTS_NAME
    if not file.is_file():
        raise BundleError(f"{path} is not a complete bundle: {WEIGHTS_NAME} is missing")
    if convert is not None:
        from .mapped import read_streamed

        return read_streamed(file, convert, BundleError)
    try:
        with safe_open(file, framework="pt", device="cpu") as f:
            return {name: f.get_tensor(name) for name in f.keys()}
    except (SafetensorError, OSError, ValueError) as e:
        raise BundleError(f"{file} is truncated or corrupted: {e}") from e


def weights_sha256(path: Path) -> str:
    """sha256 of a bundle's ``model.safetensors`` (the oasr cache records it when a bundle is committed)."""
    file = Path(path) / WEIGHTS_NAME
    if not file.is_file():
        raise BundleError(f"{path} is not a complete bundle: {WEIGHTS_NAME} is missing")
    return sha256_file(file)


def tokenizer_files(path: Path, spec: TokenizerSpec) -> dict[str, Path]:
    """Asset name -> file, each a plain name inside the bundle's ``tokenizer/`` (links that lead
    out of the bundle are refused)."""
    folder = Path(path) / TOKENIZER_DIR
    files = {
        name: inside(folder, name, what=f"{path}: the tokenizer file", error=BundleError, nested=False, within=Path(path))
        for name in spec.files
    }
    absent = [n for n, p in files.items() if not p.is_file()]
    if absent:
        raise BundleError(f"{path}: tokenizer asset(s) missing: {', '.join(absent)}")
    return files


def write_bundle(
    dst: Path,
    config: BundleConfig,
    tensors: Mapping[str, Any],
    tokenizer_assets: Mapping[str, Path],
) -> None:
    """Write a bundle atomically: ``dst`` is replaced whole or not at all. ``tensors``: torch
    tensors or numpy arrays (a conversion without torch)."""
    with atomic_directory(Path(dst)) as tmp:
        (tmp / CONFIG_NAME).write_text(config.to_json(), encoding="utf-8")
        if tokenizer_assets:
            (tmp / TOKENIZER_DIR).mkdir()
            for name, source in tokenizer_assets.items():
                target = inside(tmp / TOKENIZER_DIR, name, what="the tokenizer file", error=BundleError, nested=False)
                shutil.copyfile(source, target)
        # One key only: safetensors keeps metadata in a hash map whose order varies per process.
        write_safetensors(tensors, tmp / WEIGHTS_NAME, metadata={"format": "pt"})
