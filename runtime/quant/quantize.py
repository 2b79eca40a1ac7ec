"""``oasr quantize``: a full-precision bundle -> an int8 or int4 bundle (format version 2), atomic and idempotent."""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch

from ..io import bundle as _bundle
from ..errors import InputError
from ..io.files import atomic_directory, sha256_file
from ..version import __version__
from .layers import check_quantizable, linear_layers, plan_layers
from .schemes import GROUP_SIZE, SCHEMES, quantize_int4, quantize_int8
from .section import QuantizationSpec

log = logging.getLogger("oasr")


@dataclass
class QuantizeResult:
    source: str  # the source bundle folder
    destination: str
    status: str  # "quantized" or "skipped" (up to date)
    scheme: str
    architecture: str = ""
    layers: dict[str, str] = field(default_factory=dict)  # module -> scheme
    kept: list[str] = field(default_factory=list)  # weights of linear/embedding layers left in float
    source_bytes: int = 0  # the source's model.safetensors
    bytes: int = 0  # the result's model.safetensors
    seconds: float = 0.0
    verify: dict[str, Any] | None = None  # filled by oasr.quant.verify when asked

    @property
    def ratio(self) -> float:
        return self.bytes / self.source_bytes if self.source_bytes else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "ratio": self.ratio}


def source_bundle(spec: str | Path, progress=None) -> Path:
    """A bundle, a convertible directory or a registry name -> the full-precision bundle folder.

    A foreign directory is checked for a refused architecture before it is converted (into the
    oasr cache, as ``-m`` does).
    """
    from ..hub.resolve import resolve_model
    from ..models.architectures import find_architecture
    from ..conversion.detect import pick_converter

    path = Path(spec).expanduser()
    if path.exists() and not _bundle.is_bundle(path):
        converter, _ = pick_converter(path)
        entry = find_architecture(converter.architecture)
        check_quantizable(entry.model_cls, converter.architecture)
    return Path(resolve_model(spec, progress=progress))


def _up_to_date(dst: Path, wanted: QuantizationSpec) -> bool:
    cfg = _bundle.existing_config(dst)
    if cfg is None or cfg.quantization is None:
        return False
    have = QuantizationSpec.from_dict(cfg.quantization)
    same = ("scheme", "group_size", "layers", "source_sha256", "oasr_version", "keep")
    return all(getattr(have, k) == getattr(wanted, k) for k in same)


def _check_scheme(scheme: str) -> None:
    if scheme not in SCHEMES:
        raise InputError(f"unknown scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")


def quantize(
    src: str | Path,
    dst: str | Path,
    *,
    scheme: str,
    keep: Sequence[str] = (),
    force: bool = False,
    progress=None,
    check=None,
) -> QuantizeResult:
    """Quantize the model ``src`` names into the bundle ``dst``; an up-to-date ``dst`` is skipped.

    ``progress(step, message)`` hears the hub's steps while ``src`` is fetched or converted.
    ``check(source_bundle, quantized_bundle)`` (``--verify``) runs on the written bundle before
    it takes ``dst``'s place; what it returns becomes ``result.verify`` (``to_dict()``), and an
    exception from it leaves ``dst`` as it was. A skipped ``dst`` is checked where it is.
    """
    from ..conversion.run import check_destination

    start = time.perf_counter()
    _check_scheme(scheme)
    dst = Path(dst)
    given = Path(src).expanduser()
    if given.exists():  # a path: checked against DST before it is converted or resolved
        check_destination(given, dst)
    bundle = source_bundle(src, progress)
    check_destination(bundle, dst)
    result = quantize_bundle(bundle, dst, scheme=scheme, keep=keep, force=force, check=check, label=str(src))
    result.seconds = time.perf_counter() - start
    return result


def quantize_bundle(
    bundle: Path,
    dst: Path,
    *,
    scheme: str,
    keep: Sequence[str] = (),
    force: bool = False,
    check=None,
    label: str | None = None,
) -> QuantizeResult:
    """``quantize`` of a full-precision bundle folder into ``dst``, which the caller has checked
    (the hub's variants, ``oasr.hub.variants``, lie beside their bundle). ``label``: how the
    source is named in messages and the quantization section (default: the folder)."""
    from ..conversion.run import check_finite
    from ..models.architectures import find_architecture
    from ..models.weights import meta_model

    start = time.perf_counter()
    _check_scheme(scheme)
    src = label if label is not None else str(bundle)
    dst = Path(dst)
    cfg = _bundle.read_config(bundle)
    if cfg.quantization is not None:
        raise InputError(f"{src} is already quantized ({cfg.quantization['scheme']}); quantize its full-precision source")
    config = find_architecture(cfg.architecture).config_cls.from_dict(cfg.model)
    skeleton = meta_model(cfg.architecture, config)
    check_quantizable(skeleton, cfg.architecture)
    layers = plan_layers(skeleton, scheme, keep)
    if not layers:
        raise InputError(f"nothing left to quantize in {src}: every layer is kept in floating point")
    weights = bundle / _bundle.WEIGHTS_NAME
    spec = QuantizationSpec(
        scheme=scheme,
        group_size=GROUP_SIZE,
        layers=layers,
        source_sha256=sha256_file(weights),
        oasr_version=__version__,
        keep=tuple(skeleton.quant_keep) + tuple(keep),
        source=str(src),
    )
    result = QuantizeResult(
        source=str(bundle), destination=str(dst), status="quantized", scheme=scheme,
        architecture=cfg.architecture, layers=layers, source_bytes=weights.stat().st_size,
    )
    result.kept = sorted(f"{n}.weight" for n in linear_layers(skeleton) if n not in layers)
    if not force and _up_to_date(dst, spec):
        result.status = "skipped"
        if check is not None:
            result.verify = check(bundle, dst).to_dict()
    else:
        tensors = dict(_bundle.read_tensors(bundle))
        check_finite(tensors, f"the source bundle {bundle}")  # NaN scales would quantize it silently
        for name, layer_scheme in layers.items():
            weight = tensors.pop(f"{name}.weight")
            weight = weight.reshape(weight.shape[0], -1)  # a kernel-1 conv's [out, in, 1]
            if layer_scheme == "int8":
                q, scale = quantize_int8(weight)
            else:
                q, scale = quantize_int4(weight, GROUP_SIZE)
            tensors[f"{name}.weight"], tensors[f"{name}.weight_scale"] = q, scale
        out = dataclasses.replace(cfg, format_version=2, quantization=spec.to_dict())
        tok_files = _bundle.tokenizer_files(bundle, cfg.tokenizer)
        if check is None:
            _bundle.write_bundle(dst, out, tensors, tok_files)
        else:  # written and checked beside dst; it replaces dst only once the check passes
            with atomic_directory(dst) as staged:
                _bundle.write_bundle(staged, out, tensors, tok_files)
                result.verify = check(bundle, staged).to_dict()
        log.info("quantized %d layers of %s to %s; kept float: %s", len(layers), src, scheme, ", ".join(result.kept) or "none")
    result.bytes = (dst / _bundle.WEIGHTS_NAME).stat().st_size
    result.seconds = time.perf_counter() - start
    return result
