"""The ``quantization`` section of a format-version-2 ``oasr_config.json``, read strictly."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import BundleError
from ..specs import _Spec
from .schemes import SCHEMES

_SHA256 = re.compile(r"[0-9a-f]{64}\Z")


@dataclass(frozen=True)
class QuantizationSpec(_Spec):
    scheme: str  # what was asked for: "int8" or "int4"
    group_size: int  # int4 group length along the input features (recorded for int8 too)
    layers: dict[str, str]  # module name -> scheme of its stored weight ("int8" or "int4")
    source_sha256: str  # sha256 of the source bundle's model.safetensors
    oasr_version: str  # the oasr that quantized it
    keep: tuple[str, ...] = ()  # fnmatch patterns of weights left in floating point (model's + user's)
    source: str = ""  # what the user pointed at, for display only

    @classmethod
    def from_dict(cls, data, *, where: str = "quantization"):
        spec = super().from_dict(data, where=where)
        problems = []
        if spec.scheme not in SCHEMES:
            problems.append(f"scheme {spec.scheme!r} is not one of {', '.join(SCHEMES)}")
        if isinstance(spec.group_size, bool) or not isinstance(spec.group_size, int) or spec.group_size <= 0 or spec.group_size % 2:
            problems.append(f"group_size {spec.group_size!r} is not a positive even integer")
        if not isinstance(spec.layers, dict) or not spec.layers:
            problems.append("layers must be a non-empty object")
        else:
            bad = [f"{k}: {v!r}" for k, v in spec.layers.items() if not isinstance(k, str) or v not in SCHEMES]
            if bad:
                problems.append(f"unknown layer scheme(s): {', '.join(bad[:3])}")
        if not isinstance(spec.source_sha256, str) or not _SHA256.match(spec.source_sha256):
            problems.append("source_sha256 is not a sha256 hex digest")
        if not all(isinstance(p, str) for p in spec.keep):
            problems.append("keep must be a list of strings")
        if problems:
            raise BundleError(f"{where}: {'; '.join(problems)}")
        return spec
