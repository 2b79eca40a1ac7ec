"""A PNG of a pitch track: the voiced F0 contour over the audio's spectrogram (log frequency).

matplotlib is an optional extra (``pip install 'oasr-toolchain[plot]'``); without it
``require_matplotlib`` raises a one-line CapabilityError. Only the object-oriented API and the Agg
canvas are used, so nothing touches pyplot's global state or needs a display.
"""

from __future__ import annotations

import importlib.util
import io

import numpy as np

from ..errors import CapabilityError
from ..results import PitchTrack

NFFT = 1024  # the CREPE frame: the spectrogram resolves what the network saw
MIN_HZ, MAX_HZ = 30.0, 8000.0


def require_matplotlib() -> None:
    if importlib.util.find_spec("matplotlib") is None:
        raise CapabilityError("--plot needs matplotlib, which is not installed: pip install 'oasr-toolchain[plot]'")


def plot_png(track: PitchTrack, samples: np.ndarray, sample_rate: int = 16000) -> bytes:
    """The PNG bytes: spectrogram in dB (grey) with the voiced frames' F0 drawn on it."""
    require_matplotlib()
    from matplotlib import mlab
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    spec, freqs, times = mlab.specgram(
        np.asarray(samples, dtype=np.float64), NFFT=NFFT, Fs=sample_rate, noverlap=NFFT - sample_rate // 100
    )
    keep = (freqs >= MIN_HZ) & (freqs <= MAX_HZ)
    db = 10.0 * np.log10(spec[keep] + 1e-12)
    voiced = np.asarray(track.voiced, dtype=bool)
    f0 = np.where(voiced, np.asarray(track.frequency, dtype=np.float64), np.nan)

    fig = Figure(figsize=(10, 4), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.pcolormesh(times, freqs[keep], db, shading="auto", cmap="Greys", vmin=db.max() - 80, vmax=db.max())
    ax.plot(np.asarray(track.times), f0, color="tab:red", linewidth=1.5, label="F0 (voiced)")
    ax.set_yscale("log")
    top = np.nanmax(f0) * 4 if voiced.any() else 2000.0
    ax.set_ylim(MIN_HZ, min(MAX_HZ, max(top, 500.0)))
    ax.set_xlim(0, max(track.duration, 1e-3))
    ax.set_xlabel("time (s)")
    ax.set_ylabel("frequency (Hz)")
    ax.set_title(f"{track.source or 'audio'}: {int(voiced.sum())} of {len(voiced)} frames voiced")
    ax.legend(loc="upper right")
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()
