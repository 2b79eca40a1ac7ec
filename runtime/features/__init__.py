"""Acoustic front ends, selected by ``FeatureSpec.kind``."""

from __future__ import annotations

from torch import Tensor

from ..errors import CapabilityError
from ..specs import FeatureSpec


def compute_features(audio: Tensor, spec: FeatureSpec, **kwargs) -> Tensor:
    if spec.kind == "whisper_logmel":
        from .logmel import log_mel_spectrogram

        return log_mel_spectrogram(audio, spec, **kwargs)
    raise CapabilityError(f"unknown feature kind {spec.kind!r}")
