"""Typed results shared by every task: times in seconds (floats), JSON-serialisable, with provenance."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ResultProvenance:
    model: str  # what the user asked for (path, registry name)
    architecture: str = ""
    bundle_sha256: str = ""  # sha256 of the bundle's model.safetensors ("" when run from a foreign dir)
    revision: str = ""  # source revision (hub commit, package version) when known
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
    seek: int  # mel frame of the window this segment was decoded in
    start: float
    end: float
    text: str
    tokens: tuple[int, ...]
    temperature: float
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float
    words: tuple[Word, ...] | None = None
    speaker: str | None = None


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
        for segment in data["segments"]:
            segment["tokens"] = list(segment["tokens"])
            if segment["words"] is None:
                del segment["words"]
            if segment["speaker"] is None:
                del segment["speaker"]
            for word in segment.get("words") or ():
                if word["speaker"] is None:
                    del word["speaker"]
        return data
