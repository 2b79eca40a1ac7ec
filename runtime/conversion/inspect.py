"""``oasr inspect``: what a bundle holds, or what detection makes of a foreign source; with
``verify=True`` every tensor of a bundle is read and checked (``verify_bundle``)."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

from ..io import bundle as _bundle
from ..errors import BundleError, ConversionError, DetectionError, InputError, LoadError
from .detect import check_source, detect, pick_converter


def inspect(path: str | Path, *, verify: bool = False) -> dict[str, Any]:
    """What ``path`` is: a bundle's contents, or a foreign source's detection claims. ``verify``
    (bundles only) adds ``verify_bundle``'s report under "verify"."""
    path = check_source(Path(path))
    if _bundle.is_bundle(path):
        info = _inspect_bundle(path)
        if verify:
            info["verify"] = verify_bundle(path)
        return info
    if verify:
        raise InputError(f"{path} is not a native oasr bundle; verification reads bundles (convert it first)")
    claims = detect(path)
    info: dict[str, Any] = {"kind": "foreign", "path": str(path), "claims": [c.to_dict() for c in claims]}
    try:
        converter, _ = pick_converter(path)
        info["picked"] = converter.name
        info["architecture"] = converter.architecture
    except DetectionError as e:
        info["picked"] = None
        info["problem"] = str(e)
    return info


def _inspect_bundle(path: Path) -> dict[str, Any]:
    from safetensors import SafetensorError, safe_open

    cfg = _bundle.read_config(path)
    file = path / _bundle.WEIGHTS_NAME
    dtypes: Counter[str] = Counter()
    parameters = 0
    count = 0
    try:
        with safe_open(file, framework="pt") as f:
            for name in f.keys():
                s = f.get_slice(name)
                dtypes[s.get_dtype()] += 1
                parameters += math.prod(s.get_shape())
                count += 1
    except (SafetensorError, OSError) as e:
        raise BundleError(f"{file} is truncated or corrupted: {e}") from e
    return {
        "kind": "bundle",
        "path": str(path),
        "format_version": cfg.format_version,
        "architecture": cfg.architecture,
        "dtype": cfg.dtype,
        "parameters": parameters,
        "tensors": count,
        "tensor_dtypes": dict(sorted(dtypes.items())),
        "bytes": file.stat().st_size,
        "capabilities": list(cfg.capabilities),
        "model": cfg.model,
        "tokenizer": cfg.tokenizer.to_dict(),
        "features": cfg.features.to_dict(),
        "provenance": cfg.provenance.to_dict(),
        "quantization": cfg.quantization,
    }


def verify_bundle(path: str | Path) -> dict[str, Any]:
    """Read every tensor of a native bundle and check it: the safetensors header is intact, the
    names, shapes and dtypes fill the model exactly (the loader's accounting), every floating
    value is finite, and, for a bundle of the oasr cache, ``model.safetensors``'s sha256 is the
    one its cache record holds. Tensors are read one at a time (memory: the largest one).

    Returns {"ok", "problems" (one line each), "checks" (what was checked), "tensors",
    "sha256", "recorded_sha256"}. An unreadable config or header is a BundleError, as on loading.
    """
    import torch
    from safetensors import SafetensorError, safe_open

    from ..io.files import sha256_file
    from ..models.architectures import find_architecture
    from ..models.weights import meta_model
    from .accounting import check_tensor_dtypes, check_weights
    from .arrays import all_finite
    from .run import describe_non_finite

    path = Path(path)
    cfg = _bundle.read_config(path)
    file = path / _bundle.WEIGHTS_NAME
    if not file.is_file():
        raise BundleError(f"{path} is not a complete bundle: {_bundle.WEIGHTS_NAME} is missing")
    problems: list[str] = []
    checks: list[str] = []

    shapes: dict[str, torch.Tensor] = {}  # name -> a meta tensor of its shape and dtype
    non_finite: list[str] = []
    try:
        with safe_open(file, framework="pt", device="cpu") as f:  # parses and bounds-checks the header
            for name in f.keys():
                t = f.get_tensor(name)
                shapes[name] = torch.empty(t.shape, dtype=t.dtype, device="meta")
                if t.is_floating_point() and not all_finite(t):
                    non_finite.append(name)
                del t
    except (SafetensorError, OSError, ValueError) as e:
        raise BundleError(f"{file} is truncated or corrupted: {e}") from e
    checks.append(f"header intact, {len(shapes)} tensors read")

    try:
        entry = find_architecture(cfg.architecture)
        skeleton = meta_model(cfg.architecture, entry.config_cls.from_dict(cfg.model))
        floats = shapes
        if cfg.quantization is not None:
            from ..quant.layers import check_dtypes, stored_names, swap_quantized
            from ..quant.section import QuantizationSpec

            spec = QuantizationSpec.from_dict(cfg.quantization)
            swap_quantized(skeleton, spec)
            exact = stored_names(spec)
            floats = {k: v for k, v in shapes.items() if k not in exact}
        stored = [n for n in skeleton.computed_buffers if n in shapes]
        if stored:
            raise LoadError(f"computed buffer(s) stored in the bundle: {', '.join(stored[:3])}")
        check_weights(skeleton, shapes)
        if cfg.quantization is not None:
            check_dtypes(skeleton, shapes)
        check_tensor_dtypes(floats)
        checks.append(f"names and shapes fill the {cfg.architecture} model exactly")
    except (LoadError, BundleError, ConversionError, DetectionError, InputError) as e:
        problems.append(f"model accounting: {' '.join(str(e).split())}")

    if non_finite:
        problems.append(describe_non_finite(non_finite))
    else:
        checks.append("every floating value finite")

    from ..hub.resolve import bundle_origin

    origin = bundle_origin(path)
    recorded = (origin or {}).get("weights_sha256") or ""
    actual = sha256_file(file)
    if origin is None:
        checks.append("sha256 not compared (the bundle is not in the oasr cache)")
    elif not recorded:
        checks.append("sha256 not compared (its cache record predates recorded sha256s)")
    elif actual != recorded:
        problems.append(
            f"{_bundle.WEIGHTS_NAME} has sha256 {actual[:16]}..., its cache record says {recorded[:16]}...: "
            "the file changed after it was cached"
        )
    else:
        checks.append("sha256 matches the cache record")
    return {
        "ok": not problems,
        "problems": problems,
        "checks": checks,
        "tensors": len(shapes),
        "sha256": actual,
        "recorded_sha256": recorded or None,
    }
