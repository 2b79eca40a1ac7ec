"""Loading: any supported path -> a model on its device with everything that travels with it."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .io import bundle as _bundle
from .errors import CapabilityError, DetectionError, InputError
from .specs import DecodingDefaults, FeatureSpec, LoadReport, Provenance, TokenizerSpec
from .models.base import BaseModelConfig, OasrModel

log = logging.getLogger("oasr")

_FLOAT_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass
class LoadedModel:
    model: OasrModel
    config: BaseModelConfig
    architecture: str
    tokenizer_spec: TokenizerSpec
    feature_spec: FeatureSpec
    decoding: DecodingDefaults
    report: LoadReport
    provenance: Provenance
    tokenizer_files: dict[str, Path] = field(default_factory=dict)
    aux: dict[str, Any] = field(default_factory=dict)
    quantization: dict[str, Any] | None = None  # a quantized bundle's section (format version 2)

    @property
    def capabilities(self) -> frozenset[str]:
        return self.model.capabilities

    def tokenizer(self):
        from .tokenizers import load_tokenizer

        return load_tokenizer(self.tokenizer_spec, self.tokenizer_files)

    def bundle_config(self) -> _bundle.BundleConfig:
        dtype = next(p.dtype for p in self.model.parameters() if p.is_floating_point())
        return _bundle.BundleConfig(
            architecture=self.architecture,
            model=self.config.to_dict(),
            dtype=str(dtype).removeprefix("torch."),
            tokenizer=self.tokenizer_spec,
            features=self.feature_spec,
            decoding=self.decoding,
            provenance=self.provenance,
            capabilities=tuple(sorted(self.capabilities)),
            aux=self.aux,
            quantization=self.quantization,
            format_version=1 if self.quantization is None else 2,
        )

    def save(self, dst: Path) -> None:
        """Write this model as a native bundle (format 1, or 2 when quantized), atomically."""
        skip = set(self.model.computed_buffers)
        tensors = {k: v.detach().cpu() for k, v in self.model.state_dict().items() if k not in skip}
        _bundle.write_bundle(Path(dst), self.bundle_config(), tensors, self.tokenizer_files)


def resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda was asked for but no CUDA device is available; use --device cpu")
    return device


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device, stored: str) -> torch.dtype:
    """None/"auto": fp32 on CPU, fp16 on GPU (bf16 when stored so); "stored": as in the weights."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        if device.type == "cpu":
            return torch.float32
        return torch.bfloat16 if stored == "bfloat16" else torch.float16
    if dtype == "stored":
        return _FLOAT_DTYPES[stored]
    if dtype not in _FLOAT_DTYPES:
        raise InputError(f"unknown dtype {dtype!r}; choose auto, stored, {', '.join(_FLOAT_DTYPES)}")
    return _FLOAT_DTYPES[dtype]


def load_pretrained(
    id_or_path: str | Path,
    *,
    architecture: str | None = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
) -> LoadedModel:
    """Load a native bundle, or convert a foreign checkpoint in memory, and place it on ``device``.

    ``id_or_path`` that is not an existing path is a model name, ``auto`` or ``org/repo``: the
    resolver (``oasr.hub.resolve.resolve_model``) turns it into a cached bundle first.
    """
    if not Path(id_or_path).expanduser().exists():
        from .hub.resolve import resolve_model

        id_or_path = resolve_model(id_or_path)
    from .models.architectures import model_entry
    from .models.weights import check_tensor_dtypes, check_weights, materialize_model, meta_model
    from .conversion.detect import check_source, pick_converter

    path = check_source(Path(id_or_path))
    target = resolve_device(device)
    quantization = None
    if _bundle.is_bundle(path):  # a native bundle comes first, whatever else is asked
        cfg = _bundle.read_config(path)
        if architecture is not None and architecture != cfg.architecture:
            raise DetectionError(f"{path} is a native {cfg.architecture} bundle, not {architecture}")
        entry = model_entry(cfg.architecture)
        config = entry.config_cls.from_dict(cfg.model)
        skeleton = meta_model(cfg.architecture, config)
        if cfg.quantization is not None:
            from .quant.layers import swap_quantized
            from .quant.section import QuantizationSpec

            quantization = QuantizationSpec.from_dict(cfg.quantization)
            swap_quantized(skeleton, quantization)  # integer slots for the integer tensors
        tensors, report = check_weights(skeleton, _bundle.read_tensors(path))
        tok_files = _bundle.tokenizer_files(path, cfg.tokenizer)
        arch, specs = cfg.architecture, (cfg.tokenizer, cfg.features, cfg.decoding, cfg.provenance, cfg.aux)
    else:
        converter_cls, _ = pick_converter(path, architecture)
        converted = converter_cls(path).convert()
        for note in converted.notes:
            log.warning("%s", note)
        arch, config = converted.architecture, converted.model_config
        skeleton = meta_model(arch, config)
        tensors, report = check_weights(skeleton, converted.state_dict, converter_cls)
        tok_files = converted.tokenizer_files
        specs = (converted.tokenizer, converted.features, converted.decoding, converted.provenance, converted.aux)
    floats = tensors
    if quantization is not None:
        from .quant.layers import stored_names

        exact = stored_names(quantization)
        floats = {k: v for k, v in tensors.items() if k not in exact}
    torch_dtype = resolve_dtype(dtype, target, check_tensor_dtypes(floats))
    model = materialize_model(
        arch, config, tensors, device=target, dtype=torch_dtype, quantization=quantization, skeleton=skeleton
    )
    tokenizer, features, decoding, provenance, aux = specs
    return LoadedModel(
        model=model,
        config=config,
        architecture=arch,
        tokenizer_spec=tokenizer,
        feature_spec=features,
        decoding=decoding,
        report=report,
        provenance=provenance,
        tokenizer_files=tok_files,
        aux=aux,
        quantization=None if quantization is None else quantization.to_dict(),
    )


def from_pretrained(id_or_path, *, architecture=None, device=None, dtype=None):
    """``(model, config)`` for any supported path; see ``load_pretrained`` for everything else."""
    loaded = load_pretrained(id_or_path, architecture=architecture, device=device, dtype=dtype)
    return loaded.model, loaded.config


@functools.lru_cache(maxsize=4)
def _load(spec: str, device: str | None):
    return load_pretrained(spec, device=device)


def require_model(model: Any, architecture: str, *, device: str | None = None):
    """``model`` (a LoadedModel, a registry name or a path) as a LoadedModel of ``architecture``.

    Names and paths are loaded on first use and kept (a few at most), so a pipeline called once
    per file does not reload its small helper models every time.
    """
    if isinstance(model, LoadedModel):
        loaded = model
    else:
        loaded = _load(str(Path(model).expanduser()) if isinstance(model, Path) else str(model), device)
    if loaded.architecture != architecture:
        raise CapabilityError(f"this step needs a {architecture} model; {model!r} is a {loaded.architecture} model")
    return loaded


__all__ = ["LoadedModel", "load_pretrained", "from_pretrained", "resolve_device", "resolve_dtype"]
