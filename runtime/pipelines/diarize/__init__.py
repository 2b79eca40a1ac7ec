"""``oasr.diarize``: who spoke when, overlaps included, with speaker identities global to the file.

pyannote 3.1's recipe, step by step:

1. ``segmentation``: the segmentation model (pyannote segmentation-3.0) over 10 s windows every
   ``step`` seconds gives each window's local speakers (up to 3, two at once);
2. ``local``: one speaker embedding (CAM++ by default) per (window, local speaker), on its
   frames (without the overlapped ones, for the encoders tuned so: ``TUNED``);
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
# CAM++ is the default: chosen on training material only (AMI trn01-09, and the 40 files of two or
# three of those meetings end to end), where it beat GE2E by pooled DER (21.3% against 22.2%) and
# leave-one-meeting-out (22.9% against 25.2%); ECAPA-TDNN runs at 15 s per minute of audio, past the
# 6 s the default may take. ge2e-speaker and ecapa-voxceleb run by name (issue 29).
EMBEDDING_MODEL = "campplus-zh-en"


@dataclasses.dataclass(frozen=True)
class Tuned:
    """The settings a speaker encoder's embeddings are clustered with, its distances being its own."""

    threshold: float  # cosine distance at which clusters stop merging
    min_cluster_size: int  # smaller clusters fold into the nearest larger one
    linkage: str  # "average" or "centroid" (clustering.agglomerative)
    exclude_overlap: bool  # a local speaker's overlapped frames left out of its embedding


# Per encoder architecture, where DiarizeOptions leaves threshold and min_cluster_size None; each
# chosen by pooled DER on training files only (benchmarks/diarize_tune.py --long --pairs --grid,
# onset 0.25). ECAPA-TDNN's on trn01-09 alone (its embeddings of the 40 long files take an hour here).
TUNED = {
    "campplus": Tuned(0.4, 1, "centroid", False),
    "ge2e": Tuned(0.1, 1, "centroid", False),
    "ecapa-tdnn": Tuned(0.4, 2, "average", True),
}
FALLBACK = Tuned(0.5, 2, "average", True)  # an encoder not tuned here (WeSpeaker: no trained weights were reachable)


def tuned_settings(options: DiarizeOptions, architecture: str) -> Tuned:
    """The settings a diarization with ``architecture``'s embeddings runs with: the tuned ones, with
    ``options``' threshold and min_cluster_size where given."""
    tuned = TUNED.get(architecture, FALLBACK)
    return dataclasses.replace(
        tuned,
        threshold=tuned.threshold if options.threshold is None else options.threshold,
        min_cluster_size=tuned.min_cluster_size if options.min_cluster_size is None else options.min_cluster_size,
    )


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
    once per process); None: ``pyannote-segmentation-3.0`` and ``campplus-zh-en``.
    ``progress(done_seconds, total_seconds)`` is called as the windows are segmented, and at the end.
    """
    from .local import local_embeddings
    from .segmentation import segment

    samples, source = read_audio(audio, SAMPLE_RATE)
    duration = len(samples) / SAMPLE_RATE
    segmenter, encoder = load_models(segmentation_model, embedding_model, device=device)
    tuned = tuned_settings(options, encoder.architecture)
    options = dataclasses.replace(options, threshold=tuned.threshold, min_cluster_size=tuned.min_cluster_size)  # as run, in the provenance too
    provenance = encoder.result_provenance(options)  # the speaker model decides who is who
    identity = {k: getattr(segmenter.identity, k) for k in ("requested", "source", "bundle_sha256", "revision")}
    provenance = dataclasses.replace(provenance, options={**provenance.options, "segmentation_model": identity})
    if not len(samples):
        return SpeakerTurns(turns=(), duration=0.0, provenance=provenance, source=source)

    report = None if progress is None else (lambda done, total: progress(duration * done / total, duration))
    seg = segment(samples, segmenter, options.step, options.onset, progress=report)
    embeddings, reliable = local_embeddings(samples, seg, encoder, options.min_embed_seconds, SAMPLE_RATE, tuned.exclude_overlap)
    turns = turns_of(seg, embeddings, reliable, options, len(samples), duration, tuned.linkage)
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


def turns_of(seg, embeddings: np.ndarray, reliable: np.ndarray, options: DiarizeOptions, samples: int, duration: float, linkage: str = "average") -> list:
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
        linkage=linkage,
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
    probability = None if seg.probability is None else reconstruct.global_activity(seg, labels, max(speakers, 1), frames, seg.probability)
    binary = reconstruct.binarize(activations, count, probability)
    # Filling a pause could overlap the next speaker's turn: the exclusive view keeps its pauses.
    min_gap = 0.0 if options.exclusive else reconstruct.MIN_GAP
    turns = reconstruct.turns_from_frames(binary, seg, SAMPLE_RATE, duration, min_gap, options.speaker_names)
    if len({t.speaker for t in turns}) > len(options.speaker_names) > 0:
        log.warning("%d speakers found, %d named: the others keep SPEAKER_NN labels", len({t.speaker for t in turns}), len(options.speaker_names))
    return turns
