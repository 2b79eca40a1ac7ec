"""``oasr.diarize``: who spoke when, overlaps included, with speaker identities global to the file.

pyannote 3.1's recipe, step by step:

1. ``segmentation``: the segmentation model (pyannote segmentation-3.0) over 10 s windows every
   ``step`` seconds gives each window's local speakers (up to 3, two at once);
2. ``local``: one speaker embedding (GE2E by default) per (window, local speaker), on its
   frames without overlap;
3. ``clustering.cluster_local_speakers``: the local speakers clustered across windows, never two
   of one window together;
4. ``reconstruct``: the windows aggregated back, frame by frame, keeping as many speakers per
   frame as the segmentation counted there (one with ``exclusive``).

Time and memory: benchmarks/diarize.py (whole processes, per encoder).
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

log = logging.getLogger("oasr")

Progress = Callable[[float, float], None]

SEGMENTATION_MODEL = "pyannote-segmentation-3.0"  # the registry names used when no model is given
# GE2E stays the default: CAM++ won on trn01-trn09 (pooled DER 17.9% against ECAPA-TDNN's 18.9%)
# but did not hold on the unseen files (sample.wav one speaker, DER 59.7%; dev00+dev01 42.8%),
# where GE2E gives 6.0% and 38.9%. campplus-zh-en and ecapa-voxceleb run by name (issue 29).
EMBEDDING_MODEL = "ge2e-speaker"

# (threshold, min_cluster_size) per encoder architecture, where DiarizeOptions leaves them None:
# each tuned by pooled DER on AMI trn01-trn09 only (benchmarks/diarize_tune.py --grid).
TUNED = {"ge2e": (0.25, 2), "campplus": (0.65, 1), "ecapa-tdnn": (0.4, 2)}
FALLBACK = (0.5, 2)  # an encoder not tuned here (WeSpeaker: no trained weights were reachable)


def clustering_settings(options: DiarizeOptions, architecture: str) -> tuple[float, int]:
    """The (threshold, min_cluster_size) a diarization with ``architecture``'s embeddings uses."""
    threshold, size = TUNED.get(architecture, FALLBACK)
    return (threshold if options.threshold is None else options.threshold,
            size if options.min_cluster_size is None else options.min_cluster_size)


def diarize(
    audio: str | Path | bytes | np.ndarray,
    options: DiarizeOptions = DiarizeOptions(),
    *,
    segmentation_model: Any = None,
    embedding_model: Any = None,
    device: str | None = "auto",
    progress: Progress | None = None,
) -> SpeakerTurns:
    """Speaker turns of ``audio`` (a path, ``"-"`` for stdin, encoded bytes, or mono float32
    samples at 16 kHz), labelled ``options.speaker_names`` then ``SPEAKER_NN`` in order of first speech. Turns
    of different speakers may overlap (not with ``options.exclusive``).

    ``segmentation_model`` / ``embedding_model``: LoadedModels, registry names or paths (loaded
    once per process); None: ``pyannote-segmentation-3.0`` and ``ge2e-speaker``.
    ``progress(done_seconds, total_seconds)`` is called as the windows are segmented, and at the end.
    """
    from .local import local_embeddings
    from .segmentation import segment

    samples, source = read_audio(audio, SAMPLE_RATE)
    duration = len(samples) / SAMPLE_RATE
    segmenter, encoder = load_models(segmentation_model, embedding_model, device=device)
    threshold, size = clustering_settings(options, encoder.architecture)
    options = dataclasses.replace(options, threshold=threshold, min_cluster_size=size)  # as run, in the provenance too
    provenance = encoder.result_provenance(options)  # the speaker model decides who is who
    identity = {k: getattr(segmenter.identity, k) for k in ("requested", "source", "bundle_sha256", "revision")}
    provenance = dataclasses.replace(provenance, options={**provenance.options, "segmentation_model": identity})
    if not len(samples):
        return SpeakerTurns(turns=(), duration=0.0, provenance=provenance, source=source)

    report = None if progress is None else (lambda done, total: progress(duration * done / total, duration))
    seg = segment(samples, segmenter, options.step, options.onset, progress=report)
    embeddings, reliable = local_embeddings(samples, seg, encoder, options.min_embed_seconds, SAMPLE_RATE)
    turns = turns_of(seg, embeddings, reliable, options, len(samples), duration)
    if progress is not None:
        progress(duration, duration)
    log.info("%d speaker(s), %d turn(s)", len({t.speaker for t in turns}), len(turns))
    return SpeakerTurns(turns=tuple(turns), duration=duration, provenance=provenance, source=source)


def load_models(segmentation_model: Any = None, embedding_model: Any = None, *, device: str | None = "auto") -> tuple[Any, Any]:
    """The (segmentation, embedding) LoadedModels ``diarize`` runs, None meaning its defaults;
    loaded once per process. A pipeline that diarizes after long work (``transcribe`` with
    ``diarize``) calls this first, so a missing model or extra fails before that work."""
    segmentation_model = SEGMENTATION_MODEL if segmentation_model is None else segmentation_model
    embedding_model = EMBEDDING_MODEL if embedding_model is None else embedding_model
    segmenter = load_pretrained(segmentation_model, task="speaker-segmentation", device=device)
    encoder = load_pretrained(embedding_model, task="speaker-embedding", device=device)
    return segmenter, encoder


def turns_of(seg, embeddings: np.ndarray, reliable: np.ndarray, options: DiarizeOptions, samples: int, duration: float) -> list:
    """Steps 3 and 4: the local speakers' embeddings clustered, the windows reconstructed into
    turns (benchmarks/diarize_tune.py calls this on cached segmentations and embeddings)."""
    from . import clustering, reconstruct

    active = seg.activity.any(axis=1)
    log.info("%d window(s), %d local speaker(s), %d embedded reliably", len(seg.starts), active.sum(), reliable.sum())
    labels = clustering.cluster_local_speakers(
        embeddings,
        reliable,
        active,
        threshold=options.threshold,
        min_cluster_size=options.min_cluster_size,
        num=options.num_speakers,
        low=options.min_speakers,
        high=options.max_speakers,
    )
    frames = seg.num_global_frames(samples)
    speakers = int(labels.max()) + 1 if (labels >= 0).any() else 0
    count = reconstruct.speaker_count(seg, frames)
    if options.exclusive:
        count = np.minimum(count, 1)
    activations = reconstruct.global_activity(seg, labels, max(speakers, 1), frames)
    binary = reconstruct.binarize(activations, count)
    # Filling a pause could overlap the next speaker's turn: the exclusive view keeps its pauses.
    min_gap = 0.0 if options.exclusive else reconstruct.MIN_GAP
    turns = reconstruct.turns_from_frames(binary, seg, SAMPLE_RATE, duration, min_gap, options.speaker_names)
    if len({t.speaker for t in turns}) > len(options.speaker_names) > 0:
        log.warning("%d speakers found, %d named: the others keep SPEAKER_NN labels", len({t.speaker for t in turns}), len(options.speaker_names))
    return turns
