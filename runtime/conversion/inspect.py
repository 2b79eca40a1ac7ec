"""``oasr inspect``: what a bundle holds, or what detection makes of a foreign source."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

from ..io import bundle as _bundle
from ..errors import BundleError, DetectionError
from .detect import check_source, detect, pick_converter


def inspect(path: str | Path) -> dict[str, Any]:
    path = check_source(Path(path))
    if _bundle.is_bundle(path):
        return _inspect_bundle(path)
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
