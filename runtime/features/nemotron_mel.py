"""The ``nemotron_logmel`` front end: transformers' Nemotron ASR feature extractor, which is NeMo's
mel (``nemo_mel``) without any normalisation of the log mels: preemphasis 0.97, a symmetric Hann
window of ``win_length`` centred in ``n_fft`` points, the power spectrum, Slaney mels, log(x + 2^-24),
audio_scale 1.0. Its geometry comes from the checkpoint's processor settings.
"""

from __future__ import annotations

from typing import Any, Mapping

from torch import Tensor

from ..errors import ConversionError
from ..specs import FeatureSpec
from .nemo_mel import nemo_feature_spec, nemo_log_mel

LOG_ZERO_GUARD = 2.0**-24


def nemotron_feature_spec(fe: Mapping[str, Any]) -> FeatureSpec:
    """The spec of transformers' ``NemotronAsrStreamingFeatureExtractor`` settings (the
    ``feature_extractor`` object of ``processor_config.json``)."""
    dtype = fe.get("mel_filters_dtype", "float32")
    if dtype != "float32":
        # Nemotron Transcribe rounds its filterbank and window to bfloat16: not reproduced here.
        raise ConversionError(f"Nemotron front end: mel_filters_dtype {dtype!r} (only float32 is implemented)")
    spec = nemo_feature_spec(
        dict(
            sample_rate=int(fe.get("sampling_rate", 16000)),
            n_fft=int(fe.get("n_fft", 512)),
            win_length=int(fe.get("win_length", 400)),
            hop_length=int(fe.get("hop_length", 160)),
            n_mels=int(fe.get("feature_size", 80)),
            preemphasis=fe.get("preemphasis", 0.97),
            pad_value=float(fe.get("padding_value", 0.0)),
            log_zero_guard_value=LOG_ZERO_GUARD,
            normalize="",
        )
    )
    return FeatureSpec(
        kind="nemotron_logmel", sample_rate=spec.sample_rate, n_fft=spec.n_fft, hop_length=spec.hop_length,
        n_mels=spec.n_mels, chunk_seconds=0.0, audio_scale=1.0, options=spec.options,
    )


def nemotron_log_mel(audio: Tensor, spec: FeatureSpec, **kw) -> Tensor:
    """audio [samples] fp32 -> [n_mels, frames]: NeMo's mel with the spec's settings (no normalisation)."""
    if spec.options.get("normalize", "") != "":
        raise ConversionError("nemotron_logmel features take no normalisation; re-convert the model")
    return nemo_log_mel(audio, spec, **kw)
