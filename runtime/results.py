"""Typed results shared by every task: times in seconds (floats), JSON-serialisable, with provenance."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ResultProvenance:
    model: str  # what the user asked for (a path, a registry name, auto, org/repo)
    architecture: str = ""
    source: str = ""  # what that resolved to: "hf:org/repo@commit", "pypi:pkg==1.0", a checkpoint or bundle path
    bundle_sha256: str = ""  # sha256 of the bundle's model.safetensors
    revision: str = ""  # hub commit, pinned packages, or the digest of the converted source files
    oasr_version: str = ""
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Word:
    word: str  # as decoded, with its leading space
    start: float
    end: float
    probability: float
    speaker: str | None = None


@dataclass(frozen=True)
class Segment:
    id: int
    start: float
    end: float
    text: str
    tokens: tuple[int, ...]
    words: tuple[Word, ...] | None = None
    speaker: str | None = None
    # Whisper's statistics of the window the segment was decoded in (None for other families):
    seek: int | None = None  # mel frame where the window starts
    temperature: float | None = None
    avg_logprob: float | None = None
    compression_ratio: float | None = None
    no_speech_prob: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """openai-whisper's segment keys in its order; what a family does not produce is left out."""
        data: dict[str, Any] = {"id": self.id}
        if self.seek is not None:
            data["seek"] = self.seek
        data.update(start=self.start, end=self.end, text=self.text, tokens=list(self.tokens))
        for key in ("temperature", "avg_logprob", "compression_ratio", "no_speech_prob"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.words is not None:
            data["words"] = [{k: v for k, v in dataclasses.asdict(w).items() if k != "speaker" or v is not None} for w in self.words]
        if self.speaker is not None:
            data["speaker"] = self.speaker
        return data


@dataclass(frozen=True)
class Transcript:
    text: str
    segments: tuple[Segment, ...]
    language: str
    language_probability: float | None  # None when the language was given, not detected
    duration: float  # seconds of audio
    provenance: ResultProvenance | None = None
    source: str = ""  # the input file, "-" for stdin

    def to_dict(self) -> dict[str, Any]:
        """openai-whisper's JSON schema (text, segments, language) plus oasr's fields."""
        data = dataclasses.asdict(self)
        data["segments"] = [s.to_dict() for s in self.segments]
        return data


@dataclass(frozen=True)
class PitchTrack:
    """F0 per frame of one file; frame i is centred at ``times[i]`` (``i * hop``) seconds."""

    times: tuple[float, ...]  # seconds
    frequency: tuple[float, ...]  # Hz, the decoded F0 of every frame, voiced or not (a frame under the silence gate: that of a silent frame)
    confidence: tuple[float, ...]  # 0..1: the decoded bin's activation (0 where silence gating applied)
    voiced: tuple[bool, ...]  # confidence >= the voicing threshold, and not silent
    hop: float  # seconds between frames
    duration: float  # seconds of audio
    provenance: ResultProvenance | None = None
    source: str = ""  # the input file, "-" for stdin

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        for key in ("times", "frequency", "confidence", "voiced"):
            data[key] = list(data[key])
        return data


@dataclass(frozen=True)
class SpeakerTurn:
    start: float  # seconds
    end: float
    speaker: str  # a label global to the file ("SPEAKER_00", ...) or a reference's own name


@dataclass(frozen=True)
class SpeakerTurns:
    """Who spoke when in one file: turns sorted by start, never two of one speaker overlapping."""

    turns: tuple[SpeakerTurn, ...]
    duration: float  # seconds of audio
    provenance: ResultProvenance | None = None
    source: str = ""  # the input file, "-" for stdin

    @property
    def speakers(self) -> tuple[str, ...]:
        """The speaker labels in order of first appearance."""
        return tuple(dict.fromkeys(t.speaker for t in self.turns))

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["speakers"] = list(self.speakers)
        return data


@dataclass(frozen=True)
class SpokenSentence:
    text: str  # the line or paragraph it came from
    phonemes: str  # as the voice read them
    start: float  # seconds into the audio
    end: float  # end of its speech (the sentence silence follows)


@dataclass(frozen=True)
class Speech:
    """Synthesized speech: mono float32 samples in [-1, 1] at ``sample_rate``, sentence by sentence."""

    samples: Any  # numpy float32 [S]; left out of to_dict
    sample_rate: int
    sentences: tuple[SpokenSentence, ...]
    provenance: ResultProvenance | None = None

    @property
    def duration(self) -> float:
        return len(self.samples) / self.sample_rate

    def to_dict(self) -> dict[str, Any]:
        return {
            "sample_rate": self.sample_rate,
            "duration": self.duration,
            "sentences": [dataclasses.asdict(s) for s in self.sentences],
            "provenance": None if self.provenance is None else dataclasses.asdict(self.provenance),
        }


@dataclass(frozen=True)
class Stem:
    """One separated source of a track: written to ``path``, or held in ``samples`` [channels, n]."""

    name: str  # a source of the model ("vocals"), or "no_<source>" for --two-stems
    path: str = ""  # where it was written ("" when held in memory)
    peak: float = 0.0  # largest absolute sample before the clip policy
    scale: float = 1.0  # what the rescale policy divided it by (1: untouched)
    samples: Any = None  # float32 numpy array [channels, n] when not written; never in to_dict


@dataclass(frozen=True)
class Stems:
    """The stems of one track, at the model's rate and channels."""

    stems: tuple[Stem, ...]
    sample_rate: int
    channels: int
    duration: float  # seconds
    provenance: ResultProvenance | None = None
    source: str = ""  # the input file, "-" for stdin

    def __getitem__(self, name: str) -> Stem:
        for stem in self.stems:
            if stem.name == name:
                return stem
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.stems)

    def to_dict(self) -> dict[str, Any]:
        return {
            "stems": [{"name": s.name, "path": s.path, "peak": s.peak, "scale": s.scale} for s in self.stems],
            "sample_rate": self.sample_rate,
            "channels": self.channels,
            "duration": self.duration,
            "provenance": None if self.provenance is None else dataclasses.asdict(self.provenance),
            "source": self.source,
        }
