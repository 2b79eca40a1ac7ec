"""SpeechBrain's ``Fbank`` (``speechbrain.lobes.features``) and its sentence mean normalisation,
the front end of SpeechBrain's ECAPA-TDNN speaker encoders, in plain torch.

Per utterance: a centred STFT (``n_fft`` 400, 25 ms periodic Hamming window every 10 ms, zero
padding at both ends), the power spectrum, triangular mel bands on SpeechBrain's mel scale
(``2595 log10(1 + f / 700)``, 0 Hz to Nyquist, no Kaldi quirks), ``10 log10(max(energy, 1e-10))``,
floored 80 dB below the utterance's loudest bin (``top_db``: a per-utterance quantity, so each
utterance is computed alone), then the utterance's mean frame subtracted
(``InputNormalization(norm_type="sentence", std_norm=False)``). Samples in [-1, 1].

Shapes: S samples, T = S // hop + 1 frames, M mel bands.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import Tensor

AMIN = 1e-10  # the power floor before the log
TOP_DB = 80.0


@functools.lru_cache(maxsize=4)
def mel_matrix(sample_rate: int, n_fft: int, n_mels: int) -> Tensor:
    """[n_fft // 2 + 1, M] triangular weights, as SpeechBrain's ``Filterbank`` builds them."""

    def to_mel(hz: float) -> float:
        return 2595 * math.log10(1 + hz / 700)

    mel = torch.linspace(to_mel(0), to_mel(sample_rate // 2), n_mels + 2)
    hz = 700 * (10 ** (mel / 2595) - 1)
    band = (hz[1:] - hz[:-1])[:-1]
    central = hz[1:-1]
    freqs = torch.linspace(0, sample_rate // 2, n_fft // 2 + 1)
    slope = (freqs[None, :] - central[:, None]) / band[:, None]  # [M, bins]
    return torch.clamp(torch.minimum(slope + 1.0, 1.0 - slope), min=0.0).T.contiguous()


def sb_fbank(wave: Tensor, n_mels: int = 80, sample_rate: int = 16000, n_fft: int = 400, hop: int = 160) -> Tensor:
    """wave [S] (or [1, S]) in [-1, 1] -> [T, M] log mel energies in dB, the mean frame removed."""
    wave = wave.reshape(-1).float()
    window = torch.hamming_window(n_fft, device=wave.device)
    stft = torch.stft(wave, n_fft, hop, n_fft, window, center=True, pad_mode="constant", return_complex=True)
    power = torch.view_as_real(stft).pow(2).sum(-1).T  # [T, bins]
    db = 10 * torch.log10(torch.clamp(power @ mel_matrix(sample_rate, n_fft, n_mels).to(wave.device), min=AMIN))
    db = torch.maximum(db, db.amax() - TOP_DB)
    return db - db.mean(dim=0, keepdim=True)
