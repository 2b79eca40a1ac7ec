"""FunASR's ``WavFrontend`` up to CMVN: Kaldi fbank, then low frame rate (LFR) stacking.

Samples are scaled to the int16 range, Kaldi's fbank computed without dither (inference) and
with ``snip_edges`` (a window shorter than 25 ms for a clip shorter than that, as FunASR does),
then every ``lfr_n``-th frame starts a stack of ``lfr_m`` frames: the first frame repeated
``(lfr_m - 1) // 2`` times in front, the last repeated past the end. CMVN, the last step of
FunASR's front end, is the model's (its ``am.mvn`` rows are the Paraformer's computed buffers).
Options (``FeatureSpec.options``): ``window``, ``frame_length_ms``, ``frame_shift_ms``,
``lfr_m``, ``lfr_n``.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import torch
from torch import Tensor

from ..errors import ConversionError
from ..specs import FeatureSpec
from .fbank import WINDOWS, FbankOptions, kaldi_fbank

KIND = "funasr_fbank_lfr"
INT16_SCALE = float(1 << 15)


def funasr_feature_spec(frontend_conf: Mapping[str, Any], where: str) -> FeatureSpec:
    """The FeatureSpec of FunASR's ``frontend_conf`` (a WavFrontend's settings); what this front
    end does not compute is refused here, at conversion."""
    conf = dict(frontend_conf)
    rate = int(conf.get("fs", 16000))
    window = str(conf.get("window", "hamming"))
    if window not in WINDOWS:
        raise ConversionError(f"{where}: frontend window {window!r} is not one of {', '.join(WINDOWS)}")
    if not conf.get("snip_edges", True):
        raise ConversionError(f"{where}: a front end without snip_edges is not supported")
    if not conf.get("upsacle_samples", True):  # FunASR's spelling
        raise ConversionError(f"{where}: a front end on unscaled samples (upsacle_samples: false) is not supported")
    if int(conf.get("filter_length_min", -1)) != -1 or int(conf.get("filter_length_max", -1)) != -1:
        raise ConversionError(f"{where}: frontend filter_length_min / _max are not supported")
    lfr_m, lfr_n = int(conf.get("lfr_m", 1)), int(conf.get("lfr_n", 1))
    if lfr_m < 1 or lfr_n < 1:
        raise ConversionError(f"{where}: lfr_m {lfr_m} and lfr_n {lfr_n} must be positive")
    n_mels = int(conf.get("n_mels", 80))
    shift_ms = float(conf.get("frame_shift", 10))
    options = {
        "window": window,
        "frame_length_ms": float(conf.get("frame_length", 25)),
        "frame_shift_ms": shift_ms,
        "lfr_m": lfr_m,
        "lfr_n": lfr_n,
    }
    _fbank_options(FeatureSpec(KIND, sample_rate=rate, n_mels=n_mels, options=options), None).check()
    hop = int(rate * shift_ms * 0.001)
    return FeatureSpec(
        kind=KIND, sample_rate=rate, n_mels=n_mels * lfr_m, n_fft=int(rate * options["frame_length_ms"] * 0.001),
        hop_length=hop * lfr_n, chunk_seconds=0.0, audio_scale=INT16_SCALE, options=options,
    )


def _fbank_options(spec: FeatureSpec, samples: int | None) -> FbankOptions:
    o = spec.options
    length = float(o["frame_length_ms"])
    if samples is not None:
        length = min(length, samples / spec.sample_rate * 1000)  # FunASR's window for a clip under 25 ms
    return FbankOptions(
        sample_rate=spec.sample_rate, num_mel_bins=spec.n_mels // int(o["lfr_m"]), frame_length_ms=length,
        frame_shift_ms=float(o["frame_shift_ms"]), window=o["window"],
    )


def apply_lfr(frames: Tensor, lfr_m: int, lfr_n: int) -> Tensor:
    """[T, M] -> [ceil(T / lfr_n), lfr_m * M]: row i stacks frames i * lfr_n - (lfr_m - 1) // 2
    onwards, the first and last frames repeated where that runs past either end."""
    t = frames.shape[0]
    if t == 0 or (lfr_m == 1 and lfr_n == 1):
        return frames
    rows = math.ceil(t / lfr_n)
    left = (lfr_m - 1) // 2
    needed = (rows - 1) * lfr_n + lfr_m  # frames the last stack reaches, the left repeats included
    right = max(0, needed - (t + left))
    padded = torch.cat([frames[:1].expand(left, -1), frames, frames[-1:].expand(right, -1)])
    return padded.unfold(0, lfr_m, lfr_n)[:rows].transpose(1, 2).reshape(rows, -1)


def funasr_fbank_lfr(audio: Tensor, spec: FeatureSpec) -> Tensor:
    """audio [samples] in [-1, 1] -> [lfr_m * mel bins, LFR frames] float32."""
    if audio.dim() != 1:
        raise ValueError(f"funasr_fbank_lfr takes one signal [samples], not {list(audio.shape)}")
    samples = audio.shape[0]
    if samples < 2:
        return audio.new_zeros(spec.n_mels, 0, dtype=torch.float32)
    fbank = kaldi_fbank(audio.float() * spec.audio_scale, _fbank_options(spec, samples))
    return apply_lfr(fbank, int(spec.options["lfr_m"]), int(spec.options["lfr_n"])).T.contiguous()
