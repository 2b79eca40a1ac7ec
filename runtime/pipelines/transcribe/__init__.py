"""``oasr.transcribe``: speech -> a typed ``Transcript``, by whichever decoding family the model has.

The shared part is here: the model (``load_pretrained(..., task="transcribe")``), the audio, the
optional VAD (only speech is decoded, times mapped back), the optional diarization (a speaker on
every segment) and the provenance. The decoding is the engine of the bundle's decoding family
(``DecodingDefaults.family``), declared under the ``oasr.decoding`` entry points with its options
section (``oasr.decoding.family``): ``whisper_seq2seq`` (30 s windows, openai-whisper's long-form
rules), ``ctc`` and the transducers ``rnnt`` / ``tdt`` (encoder-only: overlapping chunks merged by
``longform.py``). A family joins with its own modules and one entry-point line.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np
import torch

from ...decoding.family import family, section_for
from ...errors import CapabilityError
from ...loading import LoadedModel, load_pretrained
from ...options import DECODING_VAD, TranscribeOptions
from ...results import Segment, Transcript
from ...io.samples import SampleFile
from ..common import read_audio
from ..vad.energy import SpeechMap, collect_speech, speech_regions

log = logging.getLogger("oasr")

Progress = Callable[[float, float], None]

@dataclass
class EngineOutput:
    segments: list[Segment]
    language: str  # "" when nothing was decoded
    language_probability: float | None  # None when the language was given or fixed, not detected


class Engine(Protocol):
    """One decoding family's transcription of speech-only samples.

    ``__init__(loaded, options, section)`` (``section``: the family's options, resolved by
    ``oasr.decoding.family.section_for``) checks them against the model (CapabilityError before any
    work); ``tokenizer`` is what segments were decoded with (diarization re-encodes split text);
    ``run`` decodes and returns segments timed on ``samples`` mapped through ``speech_map``.
    """

    tokenizer: Any

    def run(self, samples: np.ndarray, speech_map: SpeechMap | None, duration: float, progress: Progress | None) -> EngineOutput: ...


def engine_for(loaded: LoadedModel, options: TranscribeOptions) -> tuple[Engine, Any]:
    """The engine of the model's decoding family, and the options section it decodes with."""
    name = loaded.decoding.family
    section = section_for(name, options)
    return family(name).load_engine()(loaded, options, section), section


def _check_options(loaded: LoadedModel, options: TranscribeOptions) -> None:
    """What every family must declare to honour a shared option (the engine checks its own)."""
    needs = {"translate": options.task == "translate", "word_timestamps": options.word_timestamps or options.diarize}
    for capability, wanted in needs.items():
        if wanted and capability not in loaded.capabilities:
            can = ", ".join(sorted(loaded.capabilities))
            flag = "--task translate" if capability == "translate" else "--word-timestamps (or --diarize)"
            raise CapabilityError(f"{flag}: this {loaded.architecture} model cannot do {capability}; it can: {can}")


def transcribe(
    audio: str | Path | bytes | np.ndarray | torch.Tensor,
    model: Any = "auto",
    options: TranscribeOptions = TranscribeOptions(),
    *,
    device: str | torch.device | None = "auto",
    dtype: str | torch.dtype | None = "auto",
    progress: Progress | None = None,
    on_segment: Callable[[Segment], None] | None = None,
) -> Transcript:
    """Transcribe (or translate) ``audio`` with ``model``.

    ``audio``: a path, ``"-"`` for stdin, encoded bytes, or mono float32 samples at the model's
    rate (16 kHz; numpy or torch).
    ``model``: a ``LoadedModel``, or anything ``load_pretrained`` takes (a registry name, ``auto``,
    ``org/repo``, a bundle or a foreign checkpoint), loaded once per process on ``device`` in
    ``dtype`` ("auto": the GPU when there is one, fp16 there; on the CPU Whisper's int8 variant,
    made once, see ``oasr.precision``; "float32" keeps full precision).
    ``progress(done_seconds, total_seconds)`` is called as decoding advances; ``on_segment(segment)``
    hears each segment as it is decoded (an engine that decodes all at once: each, at the end;
    before --diarize gives them speakers).

    The language is ``options.language``, the model's own for single-language models, else
    detected (``Transcript.language_probability``); "" when nothing was decoded.
    """
    loaded = load_pretrained(model, task="transcribe", device=device, dtype=dtype)
    _check_options(loaded, options)
    if options.diarize:  # its models fail (missing, an extra absent) now, not after the transcription
        from ..diarize import load_models

        load_models(device=device)
    # Speakers change between words: diarization needs word times even when they are not shown.
    engine, section = engine_for(loaded, dataclasses.replace(options, word_timestamps=True) if options.diarize else options)
    sample_rate = loaded.feature_spec.sample_rate
    samples, source = read_audio(audio, sample_rate)
    duration = len(samples) / sample_rate
    speech_map: SpeechMap | None = None
    original = samples  # diarization runs on the whole recording, not the VAD-joined speech
    if options.vad is not None:
        regions = _silero_regions(samples, options.vad_options) if options.vad == "silero" else speech_regions(samples, sample_rate)
        kept = sum(b - a for a, b in regions) / sample_rate
        log.info("%s VAD kept %.1f s of %.1f s in %d region(s)", options.vad, kept, duration, len(regions))
        samples, speech_map = collect_speech(samples, regions, sample_rate)
    if isinstance(samples, SampleFile) and not getattr(engine, "reads_windows", False):
        samples = np.asarray(samples)  # an engine that takes a whole array gets one
    streams = on_segment is not None and getattr(engine, "streams_segments", False)
    with torch.inference_mode():
        out = engine.run(samples, speech_map, duration, progress, **({"on_segment": on_segment} if streams else {}))
    segments = out.segments
    if on_segment is not None and not streams:
        for segment in segments:
            on_segment(segment)
    if options.diarize:
        segments = _with_speakers(original, segments, engine.tokenizer, options, device)
    if progress is not None:
        progress(duration, duration)
    return Transcript(
        text="".join(s.text for s in segments),
        segments=tuple(segments),
        language=out.language,
        language_probability=out.language_probability,
        duration=duration,
        provenance=loaded.result_provenance(dataclasses.replace(options, beam_size=None, decoding=section)),
        source=source,
    )


def _silero_regions(samples: np.ndarray, options=None) -> list[tuple[int, int]]:
    """Silero VAD speech as sample ranges, with ``options`` or faster-whisper's settings for
    decoding (DECODING_VAD)."""
    from ..vad.silero import speech_probabilities, speech_samples

    return speech_samples(speech_probabilities(samples), len(samples), options or DECODING_VAD)


def _with_speakers(samples: np.ndarray, segments: list[Segment], tokenizer, options: TranscribeOptions, device) -> list[Segment]:
    """Segments with the speakers of ``oasr.diarize`` on the same recording (split at word
    boundaries where the speaker changes; words kept only when they were asked for)."""
    from ..diarize import diarize
    from ..diarize.attribution import attribute_speakers

    from ...options import DiarizeOptions

    asked = options.diarization or DiarizeOptions()
    turns = diarize(samples, dataclasses.replace(asked, exclusive=True), device=device)  # one speaker per word
    log.info("diarization: %d speaker(s) in %d turn(s)", len(turns.speakers), len(turns.turns))
    return attribute_speakers(segments, turns.turns, tokenizer.encode, keep_words=options.word_timestamps)
