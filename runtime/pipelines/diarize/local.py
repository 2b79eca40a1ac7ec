"""One speaker embedding per (window, local speaker), on that speaker's frames without overlap.

As pyannote 3.1 does: a local speaker's frames where someone else also speaks are left out, unless
that leaves less than ``min_seconds`` of speech (then all its frames are used); a speaker with less
than ``min_seconds`` even so is embedded but not reliable: the clustering does not learn from it,
it is only assigned to a cluster. A local speaker never active has a NaN row.
The kept frames' samples are joined and embedded as one utterance (GE2E: each (window, speaker)
apart from the others, zeros outside it; ECAPA-TDNN and CAM++: one utterance at a time, as
pyannote 3.0 feeds SpeechBrain's encoder the masked samples of a window). Shapes: N windows, T frames, K local
speakers, E embedding size.
"""

from __future__ import annotations

import numpy as np

from .embedding import embed_segments, embed_utterances, embed_weighted_windows, uses_frame_weights, uses_utterances, volume_gain
from .segmentation import Segmentation

PAIRS_PER_BATCH = 64  # (window, speaker) pairs embedded at once: at most ~64 x 10 s of samples joined


def speaker_masks(activity: np.ndarray, min_frames: int, exclude_overlap: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """activity [N, T, K] 0/1 -> (masks [N, T, K] 0/1 of the frames to embed, reliable [N, K]);
    ``exclude_overlap=False`` embeds every active frame."""
    clean = activity * (activity.sum(axis=2, keepdims=True) < 2) if exclude_overlap else activity
    use_clean = clean.sum(axis=1, keepdims=True) >= min_frames
    masks = np.where(use_clean, clean, activity)
    return masks, masks.sum(axis=1) >= max(min_frames, 1)


def local_embeddings(
    samples: np.ndarray, seg: Segmentation, encoder, min_seconds: float, sample_rate: int, exclude_overlap: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """([N, K, E] embeddings, NaN rows for local speakers never active; reliable [N, K])."""
    n, t, k = seg.activity.shape
    min_frames = int(np.ceil(min_seconds * sample_rate / seg.frame_step))
    masks, reliable = speaker_masks(seg.activity, min_frames, exclude_overlap)
    if uses_frame_weights(encoder):  # WeSpeaker: the whole window, the speaker's frames as pooling weights
        out = embed_weighted_windows(samples, seg.starts, seg.window, masks.transpose(0, 2, 1), encoder)
        return out, reliable & ~np.isnan(out[..., 0])
    embeddable = masks.sum(axis=1) > 0
    size = encoder.config.embedding_size
    out = np.full((n, k, size), np.nan, dtype=np.float32)
    gain = 1.0 if uses_utterances(encoder) else volume_gain(samples)  # GE2E: one level for the whole recording
    # Frame j of a window covers the frame_step samples around its receptive field's centre.
    offset = seg.frame_offset - seg.frame_step // 2
    pairs = list(zip(*np.nonzero(embeddable)))
    for first in range(0, len(pairs), PAIRS_PER_BATCH):  # bounded memory on long files
        pieces, spans, owners, position = [], [], [], 0
        for w, c in pairs[first : first + PAIRS_PER_BATCH]:
            frames = np.flatnonzero(masks[w, :, c])
            starts = seg.starts[w] + offset + frames * seg.frame_step
            index = (starts[:, None] + np.arange(seg.frame_step)[None, :]).reshape(-1)
            index = index[(index >= 0) & (index < len(samples))]
            if not len(index):
                continue
            # One slice of the window's samples, then its frames (a SampleFile is read in slices).
            lo = int(index.min())
            piece = samples[lo : int(index.max()) + 1][index - lo]
            pieces.append(piece)
            spans.append((position / sample_rate, (position + len(piece)) / sample_rate))
            owners.append((w, c))
            position += len(piece)
        if pieces and uses_utterances(encoder):
            for (w, c), e in zip(owners, embed_utterances(pieces, encoder)):
                out[w, c] = e
        elif pieces:
            embeds = embed_segments(np.concatenate(pieces), spans, encoder, gain=gain)
            for (w, c), e in zip(owners, embeds):
                out[w, c] = e
    return out, reliable & ~np.isnan(out[..., 0])
