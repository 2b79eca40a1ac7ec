"""``oasr.diarize``: who spoke when, with speaker identities global to the file.

Silero VAD finds the speech; GE2E embeds sliding windows over it; the windows are clustered and
the clusters turned into smoothed turns (``diarize_core``). Both models are small: 30 s of
speech take about half a second on two idle CPU cores (benchmarks/diarize.py).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ...io.audio import SAMPLE_RATE
from ...loading import load_pretrained
from ...options import DiarizeOptions
from ...results import SpeakerTurns
from ..common import read_audio
from .timeline import diarize_regions

log = logging.getLogger("oasr")

Progress = Callable[[float, float], None]

VAD_MODEL = "silero-vad"  # the registry names used when no model is given
EMBEDDING_MODEL = "ge2e-speaker"
PROGRESS_WINDOWS = 256  # windows embedded between progress reports


def diarize(
    audio: str | Path | bytes | np.ndarray,
    options: DiarizeOptions = DiarizeOptions(),
    *,
    vad_model: Any = None,
    embedding_model: Any = None,
    device: str | None = "auto",
    progress: Progress | None = None,
) -> SpeakerTurns:
    """Speaker turns of ``audio`` (a path, ``"-"`` for stdin, encoded bytes, or mono float32
    samples at 16 kHz), labelled ``SPEAKER_00``, ``SPEAKER_01``... in order of first speech.

    ``vad_model`` / ``embedding_model``: LoadedModels, registry names or paths (loaded once per
    process); None: ``silero-vad`` and ``ge2e-speaker``. ``progress(done_seconds, total_seconds)``
    is called as the embedding windows advance through the audio, and once at the end.
    """
    from ..vad.silero import detect_speech
    from .embedding import embed_segments, volume_gain

    vad_model = VAD_MODEL if vad_model is None else vad_model
    embedding_model = EMBEDDING_MODEL if embedding_model is None else embedding_model

    samples, source = read_audio(audio, SAMPLE_RATE)
    duration = len(samples) / SAMPLE_RATE
    vad = load_pretrained(vad_model, task="vad", device=device)
    encoder = load_pretrained(embedding_model, task="speaker-embedding", device=device)
    provenance = encoder.result_provenance(options)  # the speaker model decides who is who
    vad_identity = {k: getattr(vad.identity, k) for k in ("requested", "source", "bundle_sha256", "revision")}
    provenance = dataclasses.replace(provenance, options={**provenance.options, "vad_model": vad_identity})
    regions = detect_speech(samples, vad, options.vad) if len(samples) else []
    speech = sum(b - a for a, b in regions)
    log.info("VAD: %.1f s of speech in %d region(s) of %.1f s", speech, len(regions), duration)

    def embed(windows):
        """[n, E] embeddings, a progress report (the audio time reached) every few hundred windows."""
        log.info("embedding %d window(s) of %.1f s", len(windows), options.window)
        parts = []
        gain = volume_gain(samples) if windows else 1.0  # one level for the whole recording, measured once
        for first in range(0, len(windows), PROGRESS_WINDOWS):
            chunk = windows[first : first + PROGRESS_WINDOWS]
            parts.append(embed_segments(samples, chunk, encoder, gain=gain))
            if progress is not None:
                progress(min(chunk[-1][1], duration), duration)
        return np.concatenate(parts)

    turns = diarize_regions(regions, duration, embed, options)
    if progress is not None:
        progress(duration, duration)
    speakers = len({t.speaker for t in turns})
    log.info("%d speaker(s), %d turn(s)", speakers, len(turns))
    return SpeakerTurns(turns=tuple(turns), duration=duration, provenance=provenance, source=source)
