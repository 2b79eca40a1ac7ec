"""Acoustic front ends, chosen by ``FeatureSpec.kind``.

Each kind is an ``oasr.features`` entry point: ``fn(audio [samples] tensor, spec, **kw) -> features``.
"""

from __future__ import annotations

from typing import Callable

from .. import plugins
from ..specs import FeatureSpec


def feature_extractor(spec: FeatureSpec) -> Callable:
    """The front end of ``spec.kind``, called as ``fn(audio, spec, **kw)``."""
    return plugins.load("oasr.features", spec.kind, "feature kind")
