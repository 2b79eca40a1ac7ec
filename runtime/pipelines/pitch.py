"""``oasr.pitch``: a CREPE F0 track of a whole file.

The audio (resampled to 16 kHz) is zero-padded by half a frame on both sides and cut into
1024-sample frames every ``hop`` (frame i is centred at ``i * hop``, as torchcrepe and CREPE do
it); a batch of ``batch_size`` frames at a time is cut from the samples it covers (a strided view
of that stretch on the model's device, never a padded copy of the whole file) and run through the
network. The frame-wise decoders decode each batch as it comes, so an hour of audio never holds
its 360 activations per frame; Viterbi needs the whole sequence and keeps them (about 0.5 GB an
hour at the 10 ms hop).

A frame whose level is under ``silence_db`` is unvoiced with confidence 0 whatever the network
says: the network normalises every frame to unit variance, so it sees pitch in near-silence as
readily as in speech. Such a frame is not run through the network at all: it is given the
network's output for a silent frame (all zeros, whose normalised input is zero too), computed
once per run. So digital silence decodes exactly as before (its frequency, the decoders' value
for that output), any frame under the gate decodes as silence would, every decoder sees one
well-defined observation per frame (Viterbi's path runs through the gated stretch with its
transition limits intact), and an hour of silence costs no network time.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch

from ..decoding.pitch import decode
from ..errors import InputError
from ..io.audio import all_finite
from ..io.samples import as_samples
from ..models.crepe import FRAME, SAMPLE_RATE
from ..loading import load_pretrained
from ..options import PitchOptions
from ..results import PitchTrack
from .common import read_audio

log = logging.getLogger("oasr")

Progress = Callable[[float, float], None]

# Frames per forward pass when options.batch_size is None: large enough to keep the convolutions
# in big matrix products, small enough that layer 1's output ([batch, C, 257] floats) stays modest.
DEFAULT_BATCH = {("cpu", "tiny"): 1024, ("cpu", "full"): 64, ("cuda", "tiny"): 4096, ("cuda", "full"): 1024}
LEVEL_FLOOR = 1e-20  # power floor before the log: digital silence is -200 dBFS, not -inf


def pitch(
    audio: str | Path | bytes | np.ndarray | torch.Tensor,
    model: Any = "crepe-tiny",
    options: PitchOptions = PitchOptions(),
    *,
    sample_rate: int = SAMPLE_RATE,
    device: str | torch.device | None = "auto",
    dtype: str | torch.dtype | None = "auto",
    progress: Progress | None = None,
) -> PitchTrack:
    """The F0 track of ``audio`` by a CREPE ``model``.

    ``audio``: a path, ``"-"`` for stdin, encoded bytes, or mono float samples (numpy or torch)
    at ``sample_rate`` Hz (resampled to 16 kHz when it differs).
    ``model``: a ``LoadedModel``, a registry name (``crepe-tiny``, ``crepe-full``, ``auto``), a
    native bundle or a torchcrepe state dict; names and paths are loaded once per process
    (on ``device`` in ``dtype``; "auto": the GPU when there is one, fp16 there, fp32 on CPU).
    ``progress(done_seconds, total_seconds)`` is called after every batch of frames.
    """
    loaded = load_pretrained(model, task="pitch", device=device, dtype=dtype)
    samples, source = _read_audio(audio, sample_rate)
    duration = len(samples) / SAMPLE_RATE
    hop = options.hop_samples
    batch = options.batch_size or _default_batch(loaded)
    with torch.inference_mode():
        batches = frame_batches(loaded.model, samples, hop, batch, progress, silence_db=options.silence_db)
        if options.decoder == "viterbi":
            activation, level_db = (torch.cat(parts) for parts in zip(*batches))
            _, frequency, confidence = decode(activation, options.decoder, options.fmin, options.fmax)
        else:
            decoded = [(*decode(a, options.decoder, options.fmin, options.fmax)[1:], level) for a, level in batches]
            frequency, confidence, level_db = (torch.cat(parts) for parts in zip(*decoded))
        voiced = confidence >= options.voicing_threshold
        if options.silence_db is not None:
            silent = level_db < options.silence_db
            confidence = confidence.masked_fill(silent, 0.0)
            voiced &= ~silent
    n = frequency.shape[0]
    log.info("%s: %d frame(s), %d voiced", source or "audio", n, int(voiced.sum()))
    return PitchTrack(
        times=tuple((np.arange(n, dtype=np.float64) * (hop / SAMPLE_RATE)).round(9).tolist()),
        frequency=tuple(frequency.cpu().double().numpy().round(4).tolist()),
        confidence=tuple(confidence.cpu().double().numpy().round(6).tolist()),
        voiced=tuple(voiced.cpu().numpy().tolist()),
        hop=hop / SAMPLE_RATE,
        duration=duration,
        provenance=loaded.result_provenance({**dataclasses.asdict(options), "capacity": loaded.config.capacity}),
        source=source,
    )


def frame_batches(
    model: torch.nn.Module,
    samples: np.ndarray,
    hop: int,
    batch_size: int,
    progress: Progress | None = None,
    *,
    silence_db: float | None = None,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """16 kHz samples [S] -> per batch of frames: (activations [B, 360], frame levels in dBFS [B]).

    The 1 + S // hop frames are cut a batch at a time from the samples they cover (zeros beyond
    the ends); only that batch is normalised and run. With ``silence_db``, frames quieter than
    it are not run: their activations are the network's output for an all-zero frame.
    """
    device = next(model.parameters()).device
    samples = as_samples(samples)  # a SampleFile stays on disk: each batch reads its stretch
    n_frames = 1 + len(samples) // hop
    total = len(samples) / SAMPLE_RATE
    silent_activation: torch.Tensor | None = None
    for start in range(0, n_frames, batch_size):
        chunk = _frames(samples, start, min(batch_size, n_frames - start), hop, device)
        level = 10.0 * torch.log10(chunk.square().mean(dim=1) + LEVEL_FLOOR)
        if silence_db is None:
            activation = model(chunk)
        else:
            loud = torch.nonzero(level >= silence_db).flatten()
            if silent_activation is None and len(loud) < len(chunk):
                silent_activation = model(chunk.new_zeros(1, FRAME))[0]
            if len(loud) == len(chunk):
                activation = model(chunk)
            else:
                activation = silent_activation.expand(len(chunk), -1).clone()
                if len(loud):
                    activation[loud] = model(chunk[loud])
        yield activation, level
        if progress is not None:
            progress(min(total, (start + len(chunk)) * hop / SAMPLE_RATE), total)


def _frames(samples: np.ndarray, first: int, count: int, hop: int, device) -> torch.Tensor:
    """Frames ``first .. first + count - 1`` [count, 1024] (frame i centred on sample i * hop,
    zeros outside the audio): a view of the stretch of samples they cover."""
    lo = first * hop - FRAME // 2
    hi = (first + count - 1) * hop + FRAME // 2
    stretch = np.zeros(hi - lo, dtype=np.float32)
    a, b = max(lo, 0), min(hi, len(samples))
    if a < b:
        stretch[a - lo : b - lo] = samples[a:b]
    return torch.from_numpy(stretch).to(device).unfold(0, FRAME, hop)


def activations(model: torch.nn.Module, samples: np.ndarray, hop: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every batch of ``frame_batches`` joined: (activations [1 + S // hop, 360], levels [same])."""
    activation, level = zip(*frame_batches(model, samples, hop, batch_size))
    return torch.cat(activation), torch.cat(level)


def _default_batch(loaded) -> int:
    device = "cuda" if next(loaded.model.parameters()).is_cuda else "cpu"
    return DEFAULT_BATCH.get((device, loaded.config.capacity), DEFAULT_BATCH[(device, "full")])


# -- inputs -----------------------------------------------------------------------------------


def _read_audio(audio, sample_rate: int) -> tuple[np.ndarray, str]:
    """Files and bytes decoded at 16 kHz; samples given at ``sample_rate`` checked and resampled."""
    if isinstance(audio, (str, Path, bytes, bytearray, memoryview)):
        return read_audio(audio, SAMPLE_RATE)
    samples, _ = read_audio(audio, SAMPLE_RATE)
    if samples.size == 0:
        raise InputError("the audio holds no samples")
    if not all_finite(samples):
        raise InputError("the audio holds non-finite samples (NaN or infinity)")
    if sample_rate != SAMPLE_RATE:
        import soxr

        samples = soxr.resample(np.asarray(samples), sample_rate, SAMPLE_RATE, quality="HQ").astype(np.float32)
    return samples, ""
