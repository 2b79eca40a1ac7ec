"""The ``nemotron_logmel`` front end: transformers' Nemotron ASR feature extractor, which is NeMo's
mel (``nemo_mel``) without any normalisation of the log mels: preemphasis 0.97, a symmetric Hann
window of ``win_length`` centred in ``n_fft`` points, the power spectrum, Slaney mels, log(x + 2^-24),
audio_scale 1.0. Its geometry comes from the checkpoint's processor settings (read by the
``hf-nemotron-asr`` converter).
"""

from __future__ import annotations

from torch import Tensor

from ..errors import ConversionError
from ..specs import FeatureSpec
from .nemo_mel import nemo_log_mel

LOG_ZERO_GUARD = 2.0**-24


def nemotron_log_mel(audio: Tensor, spec: FeatureSpec, **kw) -> Tensor:
    """audio [samples] fp32 -> [n_mels, frames]: NeMo's mel with the spec's settings (no normalisation)."""
    if spec.options.get("normalize", "") != "":
        raise ConversionError("nemotron_logmel features take no normalisation; re-convert the model")
    return nemo_log_mel(audio, spec, **kw)
