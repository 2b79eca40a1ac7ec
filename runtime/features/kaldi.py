"""The ``kaldi_fbank`` front end: Kaldi's log mel filterbank as a FeatureSpec describes it.

icefall's models hear the fbank lhotse and kaldifeat compute for them: 80 bins, a povey window,
no dither, ``snip_edges=False``, the band from 20 Hz to 400 Hz below Nyquist, on samples in
[-1, 1]. The spec's ``options`` carry the settings (``FbankOptions`` field names); the math is
``oasr.features.fbank.kaldi_fbank``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from torch import Tensor

from ..errors import ConversionError
from ..specs import FeatureSpec
from .fbank import FbankOptions, kaldi_fbank

ICEFALL = FbankOptions(window="povey", low_freq=20.0, high_freq=-400.0, snip_edges=False)
_SPEC_FIELDS = {"sample_rate", "num_mel_bins"}


def kaldi_feature_spec(options: FbankOptions = ICEFALL) -> FeatureSpec:
    options.check()
    extra = {k: v for k, v in dataclasses.asdict(options).items() if k not in _SPEC_FIELDS}
    return FeatureSpec(
        kind="kaldi_fbank", sample_rate=options.sample_rate, n_mels=options.num_mel_bins, n_fft=options.padded_size,
        hop_length=options.window_shift, chunk_seconds=0.0, audio_scale=1.0, options=extra,
    )


def fbank_options(spec: FeatureSpec) -> FbankOptions:
    names = {f.name for f in dataclasses.fields(FbankOptions)}
    unknown = sorted(set(spec.options) - names)
    if unknown:
        raise ConversionError(f"kaldi_fbank front end: unknown setting(s) {', '.join(unknown)}")
    settings: Mapping[str, Any] = spec.options
    return FbankOptions(sample_rate=spec.sample_rate, num_mel_bins=spec.n_mels, **settings).check()


def kaldi_fbank_features(audio: Tensor, spec: FeatureSpec) -> Tensor:
    """audio [samples] -> [n_mels, frames] fp32."""
    if audio.dim() != 1:
        raise ValueError(f"kaldi_fbank takes one signal [samples], not {list(audio.shape)}")
    return kaldi_fbank(audio.float() * spec.audio_scale, fbank_options(spec)).T
