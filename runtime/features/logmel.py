"""Whisper's log-mel spectrogram in torch (80 or 128 bins), on whatever device the audio is on.

The filterbank is librosa's ``filters.mel(sr, n_fft, n_mels)`` (Slaney mel scale and area
normalisation), rebuilt here so no audio library is needed at run time.

Long files are computed a window at a time with the same values as the whole file at once
(openai-whisper's ``log_mel_spectrogram``): ``frames=(first, count)`` computes only those frames,
each from the samples it covers (the whole signal's reflect padding at the edges, the appended
zeros), and ``reference=`` is the whole signal's largest log10 mel value, which sets the floor of
every frame (``max - 8``, a per-file clamp in openai's code); ``log_mel_reference`` finds it in
blocks of frames, so no step holds more than a block's spectrogram.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ..specs import FeatureSpec

_F_SP = 200.0 / 3  # Slaney: linear below 1 kHz, 3 mels per 200 Hz
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP
_LOGSTEP = math.log(6.4) / 27.0


def _hz_to_mel(hz: Tensor) -> Tensor:
    linear = hz / _F_SP
    log = _MIN_LOG_MEL + torch.log(torch.clamp(hz, min=_MIN_LOG_HZ) / _MIN_LOG_HZ) / _LOGSTEP
    return torch.where(hz >= _MIN_LOG_HZ, log, linear)


def _mel_to_hz(mel: Tensor) -> Tensor:
    linear = mel * _F_SP
    log = _MIN_LOG_HZ * torch.exp(_LOGSTEP * (mel - _MIN_LOG_MEL))
    return torch.where(mel >= _MIN_LOG_MEL, log, linear)


@functools.lru_cache(maxsize=8)
def mel_filterbank(
    sample_rate: int, n_fft: int, n_mels: int, fmin: float = 0.0, fmax: float | None = None, slaney_norm: bool = True
) -> Tensor:
    """[n_mels, n_fft // 2 + 1] fp32 triangular filters, computed in fp64 (librosa's ``filters.mel``
    with ``fmin``, ``fmax`` (None: Nyquist) and area normalisation unless ``slaney_norm=False``)."""
    fft_freqs = torch.linspace(0, sample_rate / 2, n_fft // 2 + 1, dtype=torch.float64)
    mel_edges = torch.linspace(
        float(_hz_to_mel(torch.tensor(float(fmin), dtype=torch.float64))),
        float(_hz_to_mel(torch.tensor(sample_rate / 2 if fmax is None else float(fmax), dtype=torch.float64))),
        n_mels + 2,
        dtype=torch.float64,
    )
    hz_edges = _mel_to_hz(mel_edges)
    widths = torch.diff(hz_edges)
    ramps = hz_edges[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    # Rounded as librosa rounds (the triangles to fp32, then the fp64 area scale): its filters exactly.
    weights = torch.clamp(torch.minimum(lower, upper), min=0).float()
    if slaney_norm:
        weights = (weights.double() * (2.0 / (hz_edges[2:] - hz_edges[:-2]))[:, None]).float()
    return weights


LOG_FLOOR = 1e-10  # mel power floor before the log10
DYNAMIC_RANGE = 8.0  # log10 units kept below the file's largest value
REFERENCE_BLOCK = 3000  # frames per block while looking for the largest value (30 s at a 10 ms hop)


def log_mel_spectrogram(
    audio: Tensor,
    spec: FeatureSpec,
    padding: int = 0,
    *,
    frames: tuple[int, int] | None = None,
    reference: Tensor | float | None = None,
) -> Tensor:
    """audio [..., samples] fp32 at ``spec.sample_rate`` -> [..., n_mels, frames] fp32.

    ``padding`` zero samples are appended first (Whisper pads 30 s so every window is full); the
    padded signal has ``(samples + padding) // hop`` frames, frame j centred on sample ``j * hop``.
    ``frames=(first, count)``: only frames ``first .. first + count - 1`` of them, computed from the
    samples they cover (the same values as slicing the whole spectrogram).
    ``reference``: the largest log10 mel value of the whole padded signal (``log_mel_reference``),
    which sets the floor ``reference - 8``; None: the largest value of the frames computed here
    (for the whole signal: openai's per-file clamp).
    """
    total = (audio.shape[-1] + padding) // spec.hop_length
    first, count = (0, total) if frames is None else frames
    if not (0 <= first and 0 <= count and first + count <= total):
        raise ValueError(f"frames ({first}, {count}) outside the {total} frames of the padded signal")
    log_spec = _log10_mel(audio, spec, padding, first, count)
    if reference is None:
        reference = log_spec.amax(dim=(-2, -1), keepdim=True)
    elif not isinstance(reference, Tensor):
        reference = torch.tensor(float(reference), device=log_spec.device)
    log_spec = torch.maximum(log_spec, reference - DYNAMIC_RANGE)
    return (log_spec + 4.0) / 4.0


def log_mel_reference(audio: Tensor, spec: FeatureSpec, padding: int = 0, block: int = REFERENCE_BLOCK) -> Tensor:
    """The largest log10 mel value of the padded signal (the ``reference`` of its clamp),
    computed ``block`` frames at a time; a block whose samples are all zero needs no transform
    (its value is the floor's). A 0-d tensor ([...] for batched audio)."""
    total = (audio.shape[-1] + padding) // spec.hop_length
    floor = torch.tensor(LOG_FLOOR, dtype=torch.float32, device=audio.device).log10()
    best = floor.expand(audio.shape[:-1]).clone()
    for first in range(0, total, block):
        count = min(block, total - first)
        lo, hi = _span(first, count, spec)
        if not bool(_segment(audio, padding, lo, hi).any()):
            continue  # all zero: every value is the floor
        best = torch.maximum(best, _log10_mel(audio, spec, padding, first, count).amax(dim=(-2, -1)))
    return best


def _span(first: int, count: int, spec: FeatureSpec) -> tuple[int, int]:
    """Sample range [lo, hi) of the padded signal (before the STFT's own edge padding) that
    frames ``first .. first + count - 1`` cover; lo < 0 or hi > length reach into the reflection."""
    half = spec.n_fft // 2
    return first * spec.hop_length - half, (first + count - 1) * spec.hop_length - half + spec.n_fft


def _padded(audio: Tensor, padding: int, lo: int, hi: int) -> Tensor:
    """Samples [lo, hi) of ``audio`` followed by ``padding`` zeros (0 <= lo <= hi <= length)."""
    n = audio.shape[-1]
    core = audio[..., min(lo, n) : min(hi, n)].float()
    zeros = (hi - max(lo, n)) if hi > n else 0
    return F.pad(core, (0, zeros)) if zeros else core


def _segment(audio: Tensor, padding: int, lo: int, hi: int) -> Tensor:
    """Samples [lo, hi) of the padded signal extended by reflection at both ends, as
    ``torch.stft(center=True)`` extends it (index -k is sample k; length - 1 + k is length - 1 - k)."""
    length = audio.shape[-1] + padding
    parts = []
    if lo < 0:
        parts.append(_padded(audio, padding, 1, 1 - lo).flip(-1))
    parts.append(_padded(audio, padding, max(lo, 0), min(hi, length)))
    if hi > length:
        parts.append(_padded(audio, padding, 2 * length - 1 - hi, length - 1).flip(-1))
    return torch.cat(parts, dim=-1) if len(parts) > 1 else parts[0]


def _log10_mel(audio: Tensor, spec: FeatureSpec, padding: int, first: int, count: int) -> Tensor:
    """log10 of the floored mel power of frames ``first .. first + count - 1`` [..., n_mels, count]."""
    if count == 0:
        return audio.new_zeros((*audio.shape[:-1], spec.n_mels, 0), dtype=torch.float32)
    if audio.shape[-1] + padding <= spec.n_fft // 2:
        raise ValueError(f"{audio.shape[-1] + padding} samples are too few for a {spec.n_fft}-point STFT")
    lo, hi = _span(first, count, spec)
    segment = _segment(audio, padding, lo, hi) * spec.audio_scale
    window = torch.hann_window(spec.n_fft, device=segment.device)
    stft = torch.stft(segment, spec.n_fft, spec.hop_length, window=window, center=False, return_complex=True)
    power = stft.abs() ** 2
    filters = mel_filterbank(spec.sample_rate, spec.n_fft, spec.n_mels).to(segment.device)
    mel = filters @ power
    return torch.clamp(mel, min=LOG_FLOOR).log10()
