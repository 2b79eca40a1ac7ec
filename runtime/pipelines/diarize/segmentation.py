"""Local speaker activity: the segmentation model over sliding 10 s windows (pyannote's ``Inference``).

Windows start every ``step`` seconds, the last one flush with the end of the file (a file shorter
than a window is one zero-padded window). Each window gets per-frame activity of its 3 local
speakers, hard (the most likely powerset class) so two can be active at once. Frames are the
model's (270 samples); frame j of a window starting at sample s sits on the file's global frame
grid at round(s / 270) + j. Shapes: N windows, T frames per window, K local speakers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

BATCH = 16  # windows per forward pass


@dataclass(frozen=True)
class Segmentation:
    starts: np.ndarray  # [N] window start, in samples
    activity: np.ndarray  # [N, T, K] 0/1 local speaker activity
    window: int  # samples per window
    frame_step: int  # samples per frame
    frame_offset: int  # samples from a frame's start to its receptive field's centre
    probability: np.ndarray | None = None  # [N, T, K] the probability each local speaker talks (None: activity)

    @property
    def first_frames(self) -> np.ndarray:
        """[N] each window's first frame on the global grid."""
        return np.rint(self.starts / self.frame_step).astype(np.int64)

    def num_global_frames(self, samples: int) -> int:
        return int(self.first_frames[-1]) + self.activity.shape[1] if len(self.starts) else 0

    def frame_time(self, frames: np.ndarray, sample_rate: int) -> np.ndarray:
        """Global frame index -> the time (s) of its centre."""
        return (frames * self.frame_step + self.frame_offset) / sample_rate


def window_starts(samples: int, window: int, step: int) -> np.ndarray:
    if samples <= window:
        return np.zeros(1, dtype=np.int64)
    starts = list(range(0, samples - window + 1, step))
    if starts[-1] != samples - window:
        starts.append(samples - window)
    return np.asarray(starts, dtype=np.int64)


def window_log_probs(samples: np.ndarray, loaded, step_seconds: float, progress=None) -> tuple[np.ndarray, torch.Tensor]:
    """samples [S] 16 kHz -> (window starts [N] in samples, powerset log-probabilities [N, T, C])
    of a pyannote segmentation LoadedModel. ``progress(done_windows, windows)`` after each batch."""
    model, config = loaded.model, loaded.config
    window = int(round(config.chunk_seconds * config.sample_rate))
    starts = window_starts(len(samples), window, int(round(step_seconds * config.sample_rate)))
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    parts = []
    with torch.inference_mode():
        for first in range(0, len(starts), BATCH):
            batch = np.zeros((len(starts[first : first + BATCH]), window), dtype=np.float32)
            for row, s in enumerate(starts[first : first + BATCH]):
                piece = samples[s : s + window]
                batch[row, : len(piece)] = piece
            parts.append(model(torch.from_numpy(batch).to(device=device, dtype=dtype)).float().cpu())
            if progress is not None:
                progress(first + len(batch), len(starts))
    return starts, torch.cat(parts)


def local_activity(loaded, starts: np.ndarray, log_probs: torch.Tensor, onset: float | None = None) -> Segmentation:
    """The windows' local speaker activity from their log-probabilities. ``onset``: None, a speaker
    is active where the most likely powerset class holds it (pyannote's); else where the summed
    probability of the classes holding it reaches ``onset``."""
    model, config = loaded.model, loaded.config
    probability = model.multilabel(log_probs, soft=True)
    activity = model.multilabel(log_probs) if onset is None else (probability >= onset).float()
    return Segmentation(
        starts=starts,
        activity=activity.numpy().astype(np.float32),
        window=int(round(config.chunk_seconds * config.sample_rate)),
        frame_step=config.frame_step,
        frame_offset=config.receptive_field // 2,
        probability=probability.numpy().astype(np.float32),
    )


def segment(samples: np.ndarray, loaded, step_seconds: float, onset: float | None = None, progress=None) -> Segmentation:
    """samples [S] 16 kHz -> the windows' local speaker activity (``window_log_probs`` then
    ``local_activity``)."""
    starts, log_probs = window_log_probs(samples, loaded, step_seconds, progress)
    return local_activity(loaded, starts, log_probs, onset)
