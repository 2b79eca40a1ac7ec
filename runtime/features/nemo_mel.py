"""NeMo's mel front end (``AudioToMelSpectrogramPreprocessor`` / ``FilterbankFeatures``) in torch,
as it runs at inference (no dither, no narrow-band augmentation).

Per signal: preemphasis (``y[0] = x[0]``, ``y[i] = x[i] - a x[i-1]``), an STFT of ``n_fft`` points
with a symmetric ``win_length`` window centred in it (zero padding of ``n_fft // 2`` at both ends,
or ``(n_fft - hop) // 2`` with ``exact_pad``), the magnitude raised to ``mag_power``, librosa's
Slaney mel filterbank (``lowfreq``..``highfreq``, area-normalised unless ``mel_norm`` is None),
the log with its zero guard (``add``: log(x + v), ``clamp``: log(max(x, v)); v a number, "tiny" or
"eps"), then normalisation over the valid frames (``per_feature``: each mel's mean and unbiased
std, plus 1e-5; ``all_features``: one mean and std; ``{fixed_mean, fixed_std}``; or none).
A signal of L samples has ``(L + 2 pad - n_fft) // hop`` valid frames; NeMo's batch output also
carries one more STFT frame and ``pad_to`` padding, both filled with ``pad_value``
(``nemo_log_mel_batch`` gives exactly that; ``nemo_log_mel`` gives the valid frames).

The settings travel in ``FeatureSpec``: ``sample_rate``, ``n_fft``, ``hop_length``, ``n_mels``
there, the rest in ``FeatureSpec.options`` under the names of ``NemoMelSettings`` (defaults:
Parakeet's, which are NeMo's FastConformer recipes'). ``nemo_feature_spec`` builds the spec from
preprocessor settings in samples (a FastConformer config's ``preprocessor``).

Long signals are computed ``BLOCK`` frames at a time, each block's STFT from the samples it
covers, into the output; the normalisation statistics are summed in float64 along the way. The
peak memory is the output plus one block, not the whole STFT (1.4 GB for an hour at 512 points).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor

from ..errors import ConversionError
from ..specs import FeatureSpec
from .logmel import mel_filterbank

NORM_EPS = 1e-5  # NeMo's CONSTANT, added to the standard deviation
BLOCK = 3000  # frames per STFT block (30 s at a 10 ms hop)
WINDOWS = ("hann", "hamming", "blackman", "bartlett", "none")
_WINDOW_FNS = {"hann": torch.hann_window, "hamming": torch.hamming_window, "blackman": torch.blackman_window, "bartlett": torch.bartlett_window}


@dataclass(frozen=True)
class NemoMelSettings:
    sample_rate: int = 16000
    n_fft: int = 512
    hop_length: int = 160
    n_mels: int = 80
    win_length: int = 400
    window: str = "hann"
    preemphasis: float | None = 0.97
    mag_power: float = 2.0
    log: bool = True
    log_zero_guard_type: str = "add"
    log_zero_guard_value: float | str = 2.0**-24
    normalize: Any = "per_feature"  # "per_feature", "all_features", "" or {"fixed_mean": [...], "fixed_std": [...]}
    pad_to: int = 0
    pad_value: float = 0.0
    lowfreq: float = 0.0
    highfreq: float | None = None
    mel_norm: str | None = "slaney"
    exact_pad: bool = False

    def __post_init__(self):
        problems = []
        if self.window not in WINDOWS:
            problems.append(f"window {self.window!r} (one of {', '.join(WINDOWS)})")
        if not (0 < self.win_length <= self.n_fft) or self.hop_length <= 0:
            problems.append(f"win_length {self.win_length} / hop {self.hop_length} for an {self.n_fft}-point FFT")
        if self.log_zero_guard_type not in ("add", "clamp"):
            problems.append(f"log_zero_guard_type {self.log_zero_guard_type!r} (add or clamp)")
        if isinstance(self.log_zero_guard_value, str) and self.log_zero_guard_value not in ("tiny", "eps"):
            problems.append(f"log_zero_guard_value {self.log_zero_guard_value!r} (a number, tiny or eps)")
        if self.mel_norm not in ("slaney", None):
            problems.append(f"mel_norm {self.mel_norm!r} (slaney or none)")
        if not _fixed(self.normalize) and self.normalize not in ("per_feature", "all_features", ""):
            problems.append(f"normalize {self.normalize!r} (per_feature, all_features, fixed statistics or none)")
        if self.exact_pad and self.hop_length % 2:
            problems.append("exact_pad with an odd hop")
        if problems:
            raise ConversionError("NeMo mel front end: unsupported " + "; ".join(problems))

    @classmethod
    def from_spec(cls, spec: FeatureSpec) -> "NemoMelSettings":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(spec.options) - names)
        if unknown:
            raise ConversionError(f"nemo_logmel features: unknown option(s) {', '.join(unknown)}")
        return cls(
            sample_rate=spec.sample_rate, n_fft=spec.n_fft, hop_length=spec.hop_length, n_mels=spec.n_mels, **spec.options
        )

    @property
    def pad(self) -> int:
        """Zeros before the first sample (and after the last) that the STFT frames see."""
        return (self.n_fft - self.hop_length) // 2 if self.exact_pad else self.n_fft // 2

    def frames(self, samples: int) -> int:
        """Valid frames of a signal of ``samples`` samples (NeMo's ``get_seq_len``)."""
        return max(0, (samples + 2 * self.pad - self.n_fft) // self.hop_length)


_SPEC_FIELDS = ("sample_rate", "n_fft", "hop_length", "n_mels")
_TRAINING_ONLY = ("dither",)  # inference adds no dither


def nemo_feature_spec(preprocessor: Mapping[str, Any]) -> FeatureSpec:
    """The ``nemo_logmel`` FeatureSpec of preprocessor settings given in samples, under the names
    of ``NemoMelSettings`` (a FastConformer config's ``preprocessor``); what the front end cannot
    do is refused here, at conversion, not at transcription."""
    names = {f.name for f in dataclasses.fields(NemoMelSettings)}
    unknown = sorted(set(preprocessor) - names - set(_TRAINING_ONLY))
    if unknown:
        raise ConversionError(f"NeMo mel front end: unknown setting(s) {', '.join(unknown)}")
    settings = {k: v for k, v in preprocessor.items() if k in names}
    NemoMelSettings(**settings)
    fields = {k: settings[k] for k in _SPEC_FIELDS if k in settings}
    options = {k: v for k, v in settings.items() if k not in _SPEC_FIELDS}
    return FeatureSpec(kind="nemo_logmel", chunk_seconds=0.0, audio_scale=1.0, options=options, **fields)


def nemo_log_mel(audio: Tensor, spec: FeatureSpec, *, padded: bool = False) -> Tensor:
    """audio [samples] fp32 -> [n_mels, frames] fp32: the valid frames of NeMo's features;
    ``padded=True``: NeMo's own output (the extra STFT frame and ``pad_to`` padding, ``pad_value``)."""
    settings = NemoMelSettings.from_spec(spec)
    audio = audio.float() * spec.audio_scale if spec.audio_scale != 1.0 else audio.float()
    if audio.dim() != 1:
        raise ValueError(f"nemo_log_mel takes one signal [samples], not {list(audio.shape)}")
    features = _normalised(audio, settings)
    if not padded:
        return features
    return _pad(features, 1 + (audio.shape[-1] + 2 * settings.pad - settings.n_fft) // settings.hop_length, settings)


def nemo_log_mel_batch(audio: Tensor, lengths: Tensor, spec: FeatureSpec) -> tuple[Tensor, Tensor]:
    """NeMo's preprocessor on a batch: audio [B, S] fp32 (zeros past each length), lengths [B]
    -> features [B, n_mels, T] (T a multiple of ``pad_to``), frame lengths [B]."""
    settings = NemoMelSettings.from_spec(spec)
    total = max(1, 1 + (audio.shape[-1] + 2 * settings.pad - settings.n_fft) // settings.hop_length)
    items = [_normalised(audio[i, : int(n)].float() * spec.audio_scale, settings) for i, n in enumerate(lengths.tolist())]
    out = torch.stack([_pad(f, total, settings) for f in items])
    return out, torch.tensor([f.shape[-1] for f in items], dtype=torch.long, device=audio.device)


# ---------------------------------------------------------------------------------------------


def _fixed(normalize: Any) -> bool:
    return isinstance(normalize, Mapping) and "fixed_mean" in normalize and "fixed_std" in normalize


def _pad(features: Tensor, total: int, s: NemoMelSettings) -> Tensor:
    """The valid frames, then ``pad_value`` up to ``total`` frames and on to a multiple of ``pad_to``."""
    width = max(total, features.shape[-1])
    if s.pad_to > 0 and width % s.pad_to:
        width += s.pad_to - width % s.pad_to
    return F.pad(features, (0, width - features.shape[-1]), value=s.pad_value)


def _normalised(audio: Tensor, s: NemoMelSettings) -> Tensor:
    """[n_mels, valid frames]: log mel, block by block, then normalised over the valid frames."""
    n = s.frames(audio.shape[-1])
    out = audio.new_empty((s.n_mels, n))
    total = torch.zeros(s.n_mels, dtype=torch.float64, device=audio.device)
    for first in range(0, n, BLOCK):
        block = _log_mel(audio, s, first, min(BLOCK, n - first))
        out[:, first : first + block.shape[-1]] = block
        total += block.double().sum(dim=-1)
    if not s.normalize or n == 0:
        return out
    if _fixed(s.normalize):
        mean = torch.tensor(s.normalize["fixed_mean"], dtype=torch.float32, device=out.device).reshape(-1, 1)
        std = torch.tensor(s.normalize["fixed_std"], dtype=torch.float32, device=out.device).reshape(-1, 1)
        return (out - mean) / std
    if s.normalize == "all_features":
        mean = total.sum() / (n * s.n_mels)
        square = sum(((out[:, i : i + BLOCK].double() - mean) ** 2).sum() for i in range(0, n, BLOCK))
        std = torch.sqrt(square / max(n * s.n_mels - 1, 1)) if n * s.n_mels > 1 else torch.zeros((), dtype=torch.float64)
        return out.sub_(mean.float()).div_(std.float() + NORM_EPS)
    mean = (total / n)[:, None]
    square = sum(((out[:, i : i + BLOCK].double() - mean) ** 2).sum(dim=-1) for i in range(0, n, BLOCK))
    std = torch.sqrt(square / (n - 1))[:, None] if n > 1 else torch.zeros_like(mean)  # NeMo: NaN -> 0 for one frame
    mean, std = mean.float(), std.float() + NORM_EPS
    for i in range(0, n, BLOCK):  # in place, a block at a time: no second output-sized temporary
        out[:, i : i + BLOCK].sub_(mean).div_(std)
    return out


def _signal(audio: Tensor, s: NemoMelSettings, lo: int, hi: int) -> Tensor:
    """Samples [lo, hi) of the signal the STFT frames see: preemphasised, zero outside it.

    With ``exact_pad`` NeMo pads before its preemphasis, whose mask then zeroes everything from
    the signal's length on, counted in the padded signal: the last ``pad`` samples drop out too
    (without preemphasis there is no mask and they stay)."""
    length = audio.shape[-1]
    end = max(length - s.pad, 0) if s.exact_pad and s.preemphasis is not None else length
    a, b = max(lo, 0), min(hi, end)
    if a >= b:
        return audio.new_zeros(hi - lo)
    core = audio[a:b]
    if s.preemphasis is not None:
        previous = audio[a - 1 : b - 1] if a > 0 else torch.cat([audio.new_zeros(1), audio[: b - 1]])
        shaped = core - s.preemphasis * previous
        if a == 0:
            shaped = torch.cat([core[:1], shaped[1:]])  # y[0] = x[0]
        core = shaped
    return F.pad(core, (a - lo, hi - b))


def _log_mel(audio: Tensor, s: NemoMelSettings, first: int, count: int) -> Tensor:
    """Log mel of frames ``first .. first + count - 1`` [n_mels, count]; frame j covers samples
    ``[j hop - pad, j hop - pad + n_fft)``."""
    lo = first * s.hop_length - s.pad
    segment = _signal(audio, s, lo, lo + (count - 1) * s.hop_length + s.n_fft)
    window = _window(s, segment.device)
    stft = torch.stft(
        segment, s.n_fft, s.hop_length, win_length=s.win_length, window=window, center=False, return_complex=True
    )
    magnitude = torch.sqrt(torch.view_as_real(stft).pow(2).sum(-1))  # as NeMo: |X| first, then the power
    if s.mag_power != 1.0:
        magnitude = magnitude.pow(s.mag_power)
    filters = mel_filterbank(s.sample_rate, s.n_fft, s.n_mels, s.lowfreq, s.highfreq, s.mel_norm == "slaney")
    mel = filters.to(segment.device) @ magnitude
    if not s.log:
        return mel
    guard = s.log_zero_guard_value
    if isinstance(guard, str):
        guard = torch.finfo(mel.dtype).tiny if guard == "tiny" else torch.finfo(mel.dtype).eps
    return torch.log(mel + guard) if s.log_zero_guard_type == "add" else torch.log(torch.clamp(mel, min=guard))


def _window(s: NemoMelSettings, device) -> Tensor:
    fn = _WINDOW_FNS.get(s.window)
    if fn is None:  # NeMo's "none": a rectangular window
        return torch.ones(s.win_length, device=device)
    return fn(s.win_length, periodic=False, device=device)
