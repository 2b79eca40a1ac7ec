"""Whisper's window clock, a window being decoded, and the pieces its tokens are cut into."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from ....results import Word


@dataclass(frozen=True)
class Geometry:
    """The clock of 30-second windows: mel frames, audio tokens and seconds."""

    hop: int  # samples per mel frame
    sample_rate: int
    n_frames: int  # mel frames per window: 3000
    input_stride: int  # mel frames per audio token: 2

    @classmethod
    def of(cls, spec, n_audio_ctx: int) -> Geometry:
        n_frames = round(spec.chunk_seconds * spec.sample_rate / spec.hop_length)
        return cls(spec.hop_length, spec.sample_rate, n_frames, n_frames // n_audio_ctx)

    @property
    def time_precision(self) -> float:
        """Seconds per timestamp token: 0.02."""
        return self.input_stride * self.hop / self.sample_rate

    @property
    def frames_per_second(self) -> float:
        return self.sample_rate / self.hop

    def seconds(self, frames: int) -> float:
        return frames * self.hop / self.sample_rate


@dataclass(frozen=True)
class Window:
    """One window being decoded, on the decoded audio's clock."""

    seek: int  # its first mel frame
    size: int  # mel frames holding audio (fewer than 3000 in the last window)
    start: float  # seconds: where ``seek`` lies
    mel: Tensor  # [n_mels, 3000]: its log-mel, padded to 30 s
    features: Tensor  # [1, n_audio_ctx, C]: the encoder's output


@dataclass
class Piece:
    """A segment of the current window before it becomes a ``Segment``."""

    start: float
    end: float
    tokens: list[int]
    text: str
    words: list[Word] | None = None

    @property
    def is_empty(self) -> bool:
        """No time or no text: never kept as a segment."""
        return self.start == self.end or not self.text.strip()
