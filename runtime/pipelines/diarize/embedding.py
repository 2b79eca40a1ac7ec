"""Speaker embeddings: GE2E, ECAPA-TDNN, CAM++ or a WeSpeaker ResNet, by the bundle's architecture.

``uses_frame_weights(encoder)`` tells which way a diarization embeds a local speaker: GE2E on
that speaker's samples joined (``embed_segments``), an utterance encoder (ECAPA-TDNN, CAM++:
``uses_utterances``) the same way, one utterance at a time (``embed_utterances``), WeSpeaker on
the whole window with the speaker's frames as the statistics-pooling weights
(``embed_weighted_windows``), as pyannote 3.1 calls ``pyannote/wespeaker-voxceleb-resnet34-LM``.

GE2E, computed as Resemblyzer's ``VoiceEncoder.embed_utterance``.

An utterance is cut into partial utterances of 160 mel frames (1.6 s), one every
``round(16000 / rate / 160)`` frames (77 at the default rate 1.3/s); the last partial is kept when
it covers at least ``min_coverage`` of its span with audio (zero-padded), and there is always one.
Each partial is embedded, the partial embeddings are averaged, and the mean is L2-normalised.

Preprocessing. Resemblyzer's ``preprocess_wav`` raises quiet recordings to -30 dBFS and cuts
silences longer than about 0.2 s (webrtcvad). Here only the gain is applied
(``normalize_volume=True``, computed over the whole ``audio`` passed in): cutting silences would
move every time stamp, and a diarization pipeline hands over speech regions from its own VAD.
Parity with Resemblyzer holds on the same waveform, e.g. ``preprocess_wav``'s output with
``normalize_volume=False``.

``embed_segments`` embeds many windows of one recording at once: all partials of all windows go
through the front end and the LSTM in batches of ``batch_size``; each window is embedded exactly
as ``embed_utterance`` would embed that window alone (zeros outside it).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import torch

from ...errors import InputError
from ...features.melspec import power_mel_frames
from ...io.samples import as_samples
from ...loading import load_pretrained

TARGET_DBFS = -30.0  # Resemblyzer's audio_norm_target_dBFS
DEFAULT_RATE = 1.3  # partials per second
DEFAULT_MIN_COVERAGE = 0.75
_INT16_MAX = 2**15 - 1


RMS_BLOCK = 1 << 22  # samples squared at once (float64) while measuring a recording's level


def volume_gain(audio: np.ndarray, target_dbfs: float = TARGET_DBFS) -> float:
    """The factor that raises (never lowers) ``audio`` to ``target_dbfs`` RMS, as Resemblyzer's
    ``normalize_volume`` computes it; 1.0 for silence or audio already as loud. The level is
    summed a block at a time, so a long recording is never copied whole."""
    if audio.size == 0:
        return 1.0
    if audio.size <= RMS_BLOCK and isinstance(audio, np.ndarray):
        mean_square = float(np.mean(np.square(audio * _INT16_MAX, dtype=np.float64)))
    else:
        total = 0.0
        for first in range(0, audio.size, RMS_BLOCK):
            total += float(np.sum(np.square(audio[first : first + RMS_BLOCK] * _INT16_MAX, dtype=np.float64)))
        mean_square = total / audio.size
    rms = math.sqrt(mean_square)
    if rms == 0.0:  # silence stays silence
        return 1.0
    change_db = target_dbfs - 20.0 * math.log10(rms / _INT16_MAX)
    return 1.0 if change_db <= 0 else 10 ** (change_db / 20)


def partial_starts(
    n_samples: int, *, partial_frames: int, hop: int, sample_rate: int, rate: float, min_coverage: float
) -> list[int]:
    """First mel frame of each partial of an ``n_samples`` utterance (Resemblyzer's ``compute_partial_slices``)."""
    n_frames = math.ceil((n_samples + 1) / hop)
    frame_step = round(sample_rate / rate / hop)
    if not 0 < frame_step <= partial_frames:
        raise InputError(
            f"rate {rate} partials/s is out of range: it must lie between "
            f"{sample_rate / hop / partial_frames:.3f} and {sample_rate / hop:.0f}"
        )
    starts = list(range(0, max(1, n_frames - partial_frames + frame_step + 1), frame_step))
    coverage = (n_samples - starts[-1] * hop) / (partial_frames * hop)
    if coverage < min_coverage and len(starts) > 1:
        starts.pop()
    return starts


def embed_utterance(
    audio: np.ndarray,
    model: Any = "ge2e-speaker",
    *,
    normalize_volume: bool = True,
    rate: float = DEFAULT_RATE,
    min_coverage: float = DEFAULT_MIN_COVERAGE,
    batch_size: int = 64,
) -> np.ndarray:
    """audio [samples] 16 kHz mono float32 -> [E] (256) L2-normalised embedding of the whole utterance."""
    audio = _mono(audio)
    return embed_segments(
        audio,
        [(0.0, len(audio) / 16000)],
        model,
        batch_size=batch_size,
        normalize_volume=normalize_volume,
        rate=rate,
        min_coverage=min_coverage,
    )[0]


def embed_segments(
    audio: np.ndarray,
    segments: Sequence[tuple[float, float]],
    model: Any = "ge2e-speaker",
    *,
    batch_size: int = 64,
    normalize_volume: bool = True,
    rate: float = DEFAULT_RATE,
    min_coverage: float = DEFAULT_MIN_COVERAGE,
    gain: float | None = None,
) -> np.ndarray:
    """audio [samples] 16 kHz mono float32, n (start_s, end_s) windows -> [n, E] L2-normalised embeddings.

    ``normalize_volume`` applies one gain to the whole ``audio`` (see the module notes), to the
    samples of each batch as it is cut (the recording is never copied whole); ``gain``: that
    factor when the caller has it already (``volume_gain(audio)``, for many calls on one file).
    Windows reaching past the end of ``audio`` are cut there; a window must have ``0 <= start < end``.
    """
    loaded = load_pretrained(model, task="speaker-embedding")
    if uses_frame_weights(loaded):
        return _wespeaker_segments(_mono(audio), segments, loaded)
    encoder, spec = loaded.model, loaded.feature_spec
    partial_frames = loaded.config.partial_frames
    audio = _mono(audio)
    if not normalize_volume:
        gain = 1.0
    elif gain is None:
        gain = volume_gain(audio)
    sr, hop, n_fft = spec.sample_rate, spec.hop_length, spec.n_fft
    if sr != 16000:
        raise InputError(f"the GE2E front end expects 16 kHz audio, the model says {sr} Hz")
    if batch_size < 1:
        raise InputError(f"batch_size must be at least 1, got {batch_size}")

    # One span of samples per partial: frame j of a window is centred on sample j * hop of it,
    # with zeros outside the window (librosa's centred STFT with constant padding).
    span = (partial_frames - 1) * hop + n_fft
    owners: list[int] = []
    spans: list[tuple[int, int, int]] = []  # (window start, window end, first sample of the span)
    for index, (start_s, end_s) in enumerate(segments):
        if not 0 <= start_s < end_s:
            raise InputError(f"segment {index} ({start_s}, {end_s}): expected 0 <= start < end")
        a = min(round(start_s * sr), len(audio))
        b = min(round(end_s * sr), len(audio))
        for frame in partial_starts(
            b - a, partial_frames=partial_frames, hop=hop, sample_rate=sr, rate=rate, min_coverage=min_coverage
        ):
            owners.append(index)
            spans.append((a, b, a + frame * hop - n_fft // 2))

    device = next(encoder.parameters()).device
    dtype = next(encoder.parameters()).dtype
    partials = []
    with torch.inference_mode():
        for first in range(0, len(spans), batch_size):
            batch = np.zeros((len(spans[first : first + batch_size]), span), dtype=np.float32)
            for row, (a, b, s) in enumerate(spans[first : first + batch_size]):
                lo, hi = max(s, a), min(s + span, b)
                if lo < hi:
                    batch[row, lo - s : hi - s] = audio[lo:hi] if gain == 1.0 else audio[lo:hi] * gain
            mels = power_mel_frames(torch.from_numpy(batch).to(device), spec)
            partials.append(encoder(mels.to(dtype)).float().cpu())
        embeds = torch.zeros(len(segments), loaded.config.embedding_size)
        if spans:
            embeds.index_add_(0, torch.tensor(owners), torch.cat(partials))
    # The mean's direction is the sum's; normalising once gives Resemblyzer's mean-then-normalise.
    return torch.nn.functional.normalize(embeds, dim=1, eps=1e-12).numpy()


def uses_utterances(encoder: Any) -> bool:
    """True for an encoder that embeds one utterance of any length at a time (ECAPA-TDNN, CAM++)."""
    return hasattr(getattr(encoder, "model", None), "embed_utterance")


def embed_utterances(pieces: Sequence[np.ndarray], model: Any) -> np.ndarray:
    """n utterances (16 kHz mono float32 samples each) -> [n, E] L2-normalised embeddings, NaN
    rows for utterances shorter than the encoder's front end and convolutions take.

    Each utterance goes through alone (its front end normalises over the utterance, as the
    references compute it). An encoder carrying the training embeddings' mean (SpeechBrain's
    ``mean_var_norm_emb``) has it subtracted first, as SpeechBrain's ``normalize=True`` does."""
    loaded = load_pretrained(model, task="speaker-embedding")
    encoder = loaded.model
    if not uses_utterances(loaded):
        raise InputError(f"{loaded.architecture} does not embed utterances one at a time: use embed_segments")
    shortest = (encoder.min_frames() + 1) * loaded.feature_spec.hop_length + loaded.feature_spec.n_fft
    mean = getattr(encoder, "embedding_mean", None)
    device = next(encoder.parameters()).device
    out = np.full((len(pieces), encoder.config.embedding_size), np.nan, dtype=np.float32)
    with torch.inference_mode():
        for i, piece in enumerate(pieces):
            if len(piece) < shortest:
                continue
            e = encoder.embed_utterance(torch.from_numpy(np.ascontiguousarray(piece, dtype=np.float32)).to(device)).float()
            if mean is not None:
                e = e - mean.float()
            out[i] = torch.nn.functional.normalize(e, dim=0, eps=1e-12).cpu().numpy()
    return out


WESPEAKER = "wespeaker-resnet"  # the architecture that embeds windows with per-frame weights
WINDOWS_PER_BATCH = 8  # 10 s windows through the ResNet at once (tens of MB of activations each)


def uses_frame_weights(encoder: Any) -> bool:
    """True for an encoder that embeds a whole window with per-frame weights (WeSpeaker)."""
    return getattr(encoder, "architecture", None) == WESPEAKER


def embed_weighted_windows(
    audio: np.ndarray,
    starts: np.ndarray,
    window: int,
    weights: np.ndarray,
    model: Any = "wespeaker-resnet34",
    *,
    batch_size: int = WINDOWS_PER_BATCH,
) -> np.ndarray:
    """audio [samples] 16 kHz mono float32, window starts [N] (samples), weights [N, K, W] over
    each window's W frames (segmentation frames: resampled to the ResNet's, nearest neighbour)
    -> [N, K, E] L2-normalised WeSpeaker embeddings, NaN where a speaker's weights are all zero.

    Each window is ``window`` samples from its start, zero-padded past the end of ``audio``
    (pyannote's ``crop(mode="pad")``); its fbank is centred on the whole window, the ResNet runs
    once per window and the statistics are pooled once per speaker."""
    from ...features.fbank import centered_fbank

    loaded = load_pretrained(model, task="speaker-embedding")
    if not uses_frame_weights(loaded):
        raise InputError(f"{loaded.architecture} embeds utterances, not weighted windows: use embed_segments")
    encoder, config = loaded.model, loaded.config
    audio = _mono(audio)
    weights = np.asarray(weights, dtype=np.float32)
    n, k = len(starts), weights.shape[1] if weights.ndim == 3 else 0
    if weights.ndim != 3 or weights.shape[0] != n:
        raise InputError(f"weights must be [windows, speakers, frames] for {n} windows, got shape {weights.shape}")
    if batch_size < 1:
        raise InputError(f"batch_size must be at least 1, got {batch_size}")
    if config.fbank_options().num_frames(window) < 1:
        raise InputError(f"a window of {window} samples is shorter than one WeSpeaker fbank frame")
    device = next(encoder.parameters()).device
    dtype = next(encoder.parameters()).dtype
    out = np.full((n, k, config.embedding_size), np.nan, dtype=np.float32)
    todo = np.flatnonzero(weights.sum(axis=(1, 2)) > 0)  # windows where someone speaks
    with torch.inference_mode():
        for first in range(0, len(todo), batch_size):
            rows = todo[first : first + batch_size]
            batch = np.zeros((len(rows), window), dtype=np.float32)
            for row, w in enumerate(rows):
                a = int(starts[w])
                piece = audio[a : min(a + window, len(audio))]
                batch[row, : len(piece)] = piece
            fbank = centered_fbank(torch.from_numpy(batch).to(device), config.fbank_options())
            frames = encoder.frames(fbank.to(dtype))
            embeds = encoder.embed(frames, torch.from_numpy(weights[rows]).to(device, dtype)).float()
            out[rows] = torch.nn.functional.normalize(embeds, dim=-1, eps=1e-12).cpu().numpy()
    out[weights.sum(axis=2) == 0] = np.nan
    return out


def _wespeaker_segments(audio: np.ndarray, segments: Sequence[tuple[float, float]], loaded) -> np.ndarray:
    """Each (start_s, end_s) window embedded alone by a WeSpeaker ResNet, unweighted. No volume
    gain: a gain only shifts every log fbank value by a constant, which the mean removal cancels."""
    from ...features.fbank import centered_fbank

    encoder, config = loaded.model, loaded.config
    options = config.fbank_options()
    device = next(encoder.parameters()).device
    dtype = next(encoder.parameters()).dtype
    embeds = []
    with torch.inference_mode():
        for index, (start_s, end_s) in enumerate(segments):
            if not 0 <= start_s < end_s:
                raise InputError(f"segment {index} ({start_s}, {end_s}): expected 0 <= start < end")
            a = min(round(start_s * config.sample_rate), len(audio))
            piece = np.ascontiguousarray(audio[a : min(round(end_s * config.sample_rate), len(audio))], dtype=np.float32)
            if config.num_frames(options.num_frames(len(piece))) < 2:  # no std of fewer than two ResNet frames
                raise InputError(f"segment {index} ({start_s}, {end_s}) is too short for the WeSpeaker front end")
            fbank = centered_fbank(torch.from_numpy(piece)[None].to(device), options)
            embeds.append(encoder(fbank.to(dtype)).float().cpu())
    if not embeds:
        return np.zeros((0, config.embedding_size), dtype=np.float32)
    return torch.nn.functional.normalize(torch.cat(embeds), dim=1, eps=1e-12).numpy()


def _mono(audio: Any) -> np.ndarray:
    audio = as_samples(audio)  # a SampleFile stays on disk: each batch reads its spans
    if audio.ndim != 1:
        raise InputError(f"expected mono samples [samples], got an array of shape {audio.shape}")
    return audio
