"""Variants of a bundle: the int8 bundle dtype auto runs on a CPU, quantized once from the full-precision one.

The cache names and keeps them (``oasr.hub.cache.variant_path``: beside a cached bundle, removed
with it; under ``variants/`` for a bundle given by path); this module makes them. It stands apart
from the rest of the hub because making one quantizes (``oasr.quant.quantize``), which resolves
names through the hub.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..quant.quantize import quantize_bundle
from .cache import variant_is_current, variant_path

log = logging.getLogger("oasr")


def make_variant(bundle: Path, scheme: str = "int8") -> Path:
    """The ``scheme`` variant of the full-precision ``bundle`` (``variant_path``), quantized now
    when missing or made from other weights. Raises what ``quantize_bundle`` raises (an
    InputError for a model with no layer worth quantizing, OSError for a full disk)."""
    variant = variant_path(bundle, scheme)
    if not variant_is_current(variant, bundle, scheme):
        log.info("making the %s variant of %s at %s (once)", scheme, bundle, variant)
        variant.parent.mkdir(parents=True, exist_ok=True)
        quantize_bundle(bundle, variant, scheme=scheme, force=True)
    return variant
