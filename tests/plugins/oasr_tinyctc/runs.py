"""The plugin's own decoding family, ``tone_runs``: a label counts where it is the best one for
at least ``min_frames`` output frames in a row (shorter runs are noise), runs of one label merge,
and a space label ends a word. Declared by ``FAMILY`` under ``oasr.decoding``; the runtime finds
the options section, the engine and the verify rule through it alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np
import torch

from oasr.decoding.family import DecodingFamily
from oasr.errors import InputError
from oasr.features import feature_extractor
from oasr.results import Segment, Word

MAX_MIN_FRAMES = 1000


@dataclass(frozen=True)
class ToneRunDecoding:
    family: ClassVar[str] = "tone_runs"

    min_frames: int = 1  # output frames a label must stay the best for to count

    def __post_init__(self):
        if isinstance(self.min_frames, bool) or not isinstance(self.min_frames, int) or not 1 <= self.min_frames <= MAX_MIN_FRAMES:
            raise InputError(f"--decoding-option min_frames must be a whole number in 1..{MAX_MIN_FRAMES} (got {self.min_frames!r})")

    def check(self, shared) -> None:
        if shared.vad is not None:
            raise InputError("the tone_runs decoding reads whole recordings; drop --vad")


class Engine:
    def __init__(self, loaded, options, section: ToneRunDecoding):
        self.loaded, self.options, self.section = loaded, options, section
        self.tokenizer = loaded.tokenizer()
        self.language = loaded.decoding.options.get("language", "")

    def run(self, samples, speech_map, duration, progress):
        spec, model = self.loaded.feature_spec, self.loaded.model
        audio = torch.from_numpy(np.ascontiguousarray(samples, dtype=np.float32))
        features = feature_extractor(spec)(audio, spec)[None]
        log_probs, _ = model.ctc_log_probs(features, torch.tensor([features.shape[-1]]))
        best = log_probs[0].argmax(-1).tolist()
        frame = spec.hop_length * model.output_stride / spec.sample_rate
        words: list[list] = []  # [text, start, end, token ids]
        new_word, start = True, 0
        for i in range(1, len(best) + 1):
            if i < len(best) and best[i] == best[start]:
                continue
            label, run = best[start], i - start
            if label != self.loaded.decoding.blank_id and run >= self.section.min_frames:
                text = self.tokenizer.token_text(label)
                if not text.strip():
                    new_word = True
                elif new_word:
                    words.append([" " + text, start * frame, i * frame, [label]])
                    new_word = False
                else:
                    words[-1][0] += text
                    words[-1][2] = i * frame
                    words[-1][3].append(label)
            start = i
        segments = [
            Segment(
                id=k, start=round(a, 3), end=round(b, 3), text=text, tokens=tuple(ids),
                words=(Word(text, round(a, 3), round(b, 3), 1.0),) if self.options.word_timestamps else None,
            )
            for k, (text, a, b, ids) in enumerate(words)
        ]
        from oasr.pipelines.transcribe import EngineOutput

        return EngineOutput(segments, self.language if segments else "", None)


@dataclass(frozen=True)
class RunsVerifyReport:
    audio: str
    source_text: str
    text: str

    def to_dict(self):
        return asdict(self)

    def failures(self) -> list[str]:
        return [] if self.text == self.source_text else [f"the transcript changed: {self.source_text!r} -> {self.text!r}"]


def verify(models, samples, audio) -> RunsVerifyReport:
    """The quantized model must give the source's very transcript."""
    import oasr

    texts = [oasr.transcribe(samples, m).text for m in models]
    return RunsVerifyReport(str(audio), texts[0], texts[1])


FAMILY = DecodingFamily(
    options=ToneRunDecoding,
    engine="oasr_tinyctc.runs:Engine",
    verify="oasr_tinyctc.runs:verify",
    can_do="runs of a label of at least min_frames frames (--decoding-option min_frames=N)",
)
