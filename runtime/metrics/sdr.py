"""Source separation scores: SDR (framewise median, as museval reports it) and SI-SDR.

SDR is BSS Eval's signal-to-distortion ratio with a 512-tap distortion filter: the estimate
``e`` is projected onto the span of the reference ``s`` delayed by 0..L-1 samples (over the
n + L - 1 samples those span), and ``SDR = 10 log10(|P e|^2 / |e - P e|^2)``. (Only the
reference of the same stem enters the SDR; the other stems change BSS Eval's SIR and SAR split,
not the SDR.) The Gram matrix is the reference's autocorrelation (a Toeplitz system, solved by
Levinson recursion), both correlations computed by FFT, as fast-bss-eval does. Like museval, the
track is cut into 1 s windows every 1 s, each window scored, and the stem's SDR is the median
over windows, windows where the reference or the estimate is silent left out. Channels are
projected each onto its own reference channel and their energies summed.

SI-SDR (Le Roux et al. 2019) is over the whole signal: ``a = <e, s> / |s|^2``,
``10 log10(|a s|^2 / |a s - e|^2)``, channels summed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..errors import InputError

FILTER_LENGTH = 512
WINDOW_SECONDS = 1.0  # museval.evaluate's default win and hop
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".aiff", ".aif")


def _energies(ref: np.ndarray, est: np.ndarray, taps: int) -> tuple[float, float]:
    """(|P e|^2, |e|^2) of one channel, float64."""
    from scipy.linalg import solve_toeplitz

    n = ref.shape[-1]
    n_fft = 1 << math.ceil(math.log2(n + taps - 1))
    R = np.fft.rfft(ref, n_fft)
    E = np.fft.rfft(est, n_fft)
    acf = np.fft.irfft(np.abs(R) ** 2, n_fft)[:taps]
    xcorr = np.fft.irfft(np.conj(R) * E, n_fft)[:taps]  # sum_t s[t - k] e[t], k = 0..L-1
    coef = solve_toeplitz(acf, xcorr)
    return float(xcorr @ coef), float(est @ est)


def sdr(reference: np.ndarray, estimate: np.ndarray, taps: int = FILTER_LENGTH) -> float:
    """SDR in dB of one stretch; [channels, n] or [n]; NaN when the reference or estimate is silent."""
    ref, est = _pair(reference, estimate)
    if not np.any(ref) or not np.any(est):
        return math.nan
    projected = total = 0.0
    for r, e in zip(ref, est):
        if not np.any(r):
            total += float(e @ e)
            continue
        p, t = _energies(r, e, taps)
        projected, total = projected + p, total + t
    error = total - projected
    if projected <= 0:
        return math.nan
    return 10 * math.log10(projected / max(error, total * 1e-20))


def framewise_sdr(reference: np.ndarray, estimate: np.ndarray, sample_rate: int, window: float = WINDOW_SECONDS,
                  taps: int = FILTER_LENGTH) -> list[float]:
    """SDR of each window (museval's framing: whole windows only, or the whole signal if shorter)."""
    ref, est = _pair(reference, estimate)
    win = max(1, int(round(window * sample_rate)))
    n = ref.shape[-1]
    starts = range(0, n - win + 1, win) if n >= win else range(0, 1)
    return [sdr(ref[:, a : a + win], est[:, a : a + win], taps) for a in starts]


def median_sdr(frames: list[float]) -> float:
    scored = [f for f in frames if not math.isnan(f)]
    return float(np.median(scored)) if scored else math.nan


def si_sdr(reference: np.ndarray, estimate: np.ndarray) -> float:
    ref, est = _pair(reference, estimate)
    power = float(np.sum(ref * ref))
    if power == 0 or not np.any(est):
        return math.nan
    scale = float(np.sum(ref * est)) / power
    target = scale * ref
    noise = float(np.sum((target - est) ** 2))
    return 10 * math.log10(float(np.sum(target * target)) / max(noise, 1e-30))


def _pair(reference, estimate) -> tuple[np.ndarray, np.ndarray]:
    ref, est = (np.atleast_2d(np.asarray(x, dtype=np.float64)) for x in (reference, estimate))
    if ref.shape != est.shape:
        raise InputError(f"reference {list(ref.shape)} and estimate {list(est.shape)} differ in shape")
    return ref, est


# --- folders of stems -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StemScore:
    track: str
    stem: str
    sdr: float  # dB, median over windows (NaN: nothing scorable)
    si_sdr: float  # dB, whole signal
    frames: int  # windows scored


@dataclass(frozen=True)
class SdrReport:
    stems: tuple[StemScore, ...]
    tracks: dict[str, dict[str, float]] = field(default_factory=dict)  # track -> {sdr, si_sdr}: means over its stems
    overall: dict[str, float] = field(default_factory=dict)  # stem -> median SDR over tracks (museval's aggregate)
    missing: tuple[str, ...] = ()  # reference stems with no estimate

    def to_dict(self) -> dict[str, Any]:
        clean = lambda v: None if isinstance(v, float) and math.isnan(v) else v  # noqa: E731 JSON has no NaN
        return {
            "stems": [{k: clean(v) for k, v in vars(s).items()} for s in self.stems],
            "tracks": {t: {k: clean(v) for k, v in d.items()} for t, d in self.tracks.items()},
            "overall": {k: clean(v) for k, v in self.overall.items()},
            "missing": list(self.missing),
        }


def _stem_files(folder: Path) -> dict[str, Path]:
    return {p.stem: p for p in sorted(folder.iterdir()) if p.is_file() and p.suffix.lower() in AUDIO_SUFFIXES}


def _tracks(folder: Path, what: str) -> dict[str, dict[str, Path]]:
    """track -> stem -> file: DIR/<stem>.wav is one track (named by DIR), DIR/<track>/<stem>.wav many."""
    if not folder.is_dir():
        raise InputError(f"{what} {folder} is not a folder")
    direct = _stem_files(folder)
    if direct:
        return {folder.name: direct}
    tracks = {d.name: _stem_files(d) for d in sorted(folder.iterdir()) if d.is_dir()}
    tracks = {t: s for t, s in tracks.items() if s}
    if not tracks:
        raise InputError(f"{what} {folder} holds no stems (<stem>.wav files, or <track>/<stem>.wav)")
    return tracks


def _read(path: Path) -> tuple[np.ndarray, int]:
    import soundfile as sf

    try:
        data, rate = sf.read(path, dtype="float64", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError, EOFError) as e:
        raise InputError(f"cannot read {path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from e
    if not len(data):
        raise InputError(f"{path} holds no samples")
    return data.T, rate


def score_folders(ref: Path, est: Path) -> SdrReport:
    """Score every reference stem against the estimate of the same track and stem name."""
    import logging

    log = logging.getLogger("oasr")
    refs, ests = _tracks(Path(ref), "--ref"), _tracks(Path(est), "--est")
    if len(refs) == 1 and len(ests) == 1:  # one track each: pair them whatever their folders' names
        ests = {next(iter(refs)): next(iter(ests.values()))}
    scores, missing = [], []
    for track, stems in refs.items():
        for stem, path in stems.items():
            other = ests.get(track, {}).get(stem)
            if other is None:
                missing.append(f"{track}/{stem}")
                continue
            r, rate = _read(path)
            e, rate_e = _read(other)
            if rate != rate_e:
                raise InputError(f"{path} is at {rate} Hz and {other} at {rate_e} Hz; score stems at one rate")
            if r.shape[0] != e.shape[0]:
                raise InputError(f"{path} has {r.shape[0]} channel(s) and {other} {e.shape[0]}")
            n = min(r.shape[1], e.shape[1])
            if r.shape[1] != e.shape[1]:
                log.warning("%s and %s differ in length (%d, %d samples): scoring the first %d", path, other, r.shape[1], e.shape[1], n)
            frames = framewise_sdr(r[:, :n], e[:, :n], rate)
            scores.append(StemScore(track, stem, median_sdr(frames), si_sdr(r[:, :n], e[:, :n]), sum(not math.isnan(f) for f in frames)))
    if not scores:
        raise InputError(f"no stem of {ref} has an estimate in {est} (stems are matched by track and file name)")
    tracks: dict[str, dict[str, float]] = {}
    for track in dict.fromkeys(s.track for s in scores):
        mine = [s for s in scores if s.track == track]
        tracks[track] = {"sdr": _nanmean([s.sdr for s in mine]), "si_sdr": _nanmean([s.si_sdr for s in mine])}
    overall = {stem: median_sdr([s.sdr for s in scores if s.stem == stem]) for stem in dict.fromkeys(s.stem for s in scores)}
    return SdrReport(tuple(scores), tracks, overall, tuple(missing))


def _nanmean(values) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return float(np.mean(kept)) if kept else math.nan
