"""WeNet's front end: Kaldi fbank of the int16-scaled audio (``torchaudio.compliance.kaldi.fbank``
with WeNet's ``dataset_conf.fbank_conf``: povey window, no dither at inference, no energy).
The global CMVN is the model's (``encoder.global_cmvn``), not the front end's.

Settings: ``FeatureSpec.sample_rate`` and ``n_mels``; ``options`` ``frame_length_ms`` and
``frame_shift_ms``. Returns [M, T] (mel bands x frames) as the encoder-only engines expect.
"""

from __future__ import annotations

from torch import Tensor

from ..specs import FeatureSpec
from .fbank import FbankOptions, kaldi_fbank


def fbank_options(spec: FeatureSpec) -> FbankOptions:
    return FbankOptions(
        sample_rate=spec.sample_rate,
        num_mel_bins=spec.n_mels,
        frame_length_ms=float(spec.options.get("frame_length_ms", 25.0)),
        frame_shift_ms=float(spec.options.get("frame_shift_ms", 10.0)),
        window="povey",
    )


def wenet_fbank(audio: Tensor, spec: FeatureSpec) -> Tensor:
    """audio [S] in [-1, 1] -> [M, T]."""
    return kaldi_fbank(audio.float() * (1 << 15), fbank_options(spec)).T
