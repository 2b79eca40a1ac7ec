"""Task options: frozen dataclasses, validated in one place. CLI flags map onto these fields."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InputError

TASKS = ("transcribe", "translate")
VAD_KINDS = ("energy", "silero")


@dataclass(frozen=True)
class TranscribeOptions:
    task: str = "transcribe"  # or "translate" (to English)
    language: str | None = None  # a language code; None detects it from the first window
    beam_size: int = 5  # beams at temperature 0; 1 is greedy
    best_of: int = 5  # candidates sampled at each temperature above 0
    patience: float = 1.0  # beam search stops after beam_size * patience finished candidates
    length_penalty: float | None = None  # None: rank by sum logprob / length; else Google's alpha
    temperatures: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # tried in order while a window fails
    compression_ratio_threshold: float | None = 2.4  # gzip ratio above this: a repetitive, failed window
    logprob_threshold: float | None = -1.0  # average token logprob below this: a failed window
    no_speech_threshold: float | None = 0.6  # no-speech probability above this (and low logprob): silence
    condition_on_previous_text: bool = True  # prompt each window with the text before it
    initial_prompt: str | None = None  # text to prompt the first window with (names, spelling, style)
    suppress_tokens: tuple[int, ...] = (-1,)  # never emitted; -1 stands for the non-speech symbol set
    suppress_blank: bool = True  # no leading space or end-of-text at the start of a window
    without_timestamps: bool = False  # decode text only (segments then span whole windows)
    max_initial_timestamp: float = 1.0  # seconds: the first timestamp of a window may not start later
    word_timestamps: bool = False  # per-word times from cross-attention alignment (DTW)
    prepend_punctuations: str = "\"'“¿([{-"  # attached to the following word
    append_punctuations: str = "\"'.。,，!！?？:：”)]}、"  # attached to the preceding word
    hallucination_silence_threshold: float | None = None  # seconds of silence around a suspect segment to skip it
    vad: str | None = None  # skip non-speech before decoding: "energy" (built in) or "silero"

    def __post_init__(self):
        validate_transcribe_options(self)


def validate_transcribe_options(o: TranscribeOptions) -> None:
    def bad(message: str) -> None:
        raise InputError(message)

    if o.task not in TASKS:
        bad(f"unknown task {o.task!r}; choose {' or '.join(TASKS)}")
    if o.beam_size < 1:
        bad("--beam-size must be at least 1")
    if o.best_of < 1:
        bad("--best-of must be at least 1")
    if o.patience <= 0:
        bad("--patience must be positive")
    if not o.temperatures or any(t < 0 for t in o.temperatures):
        bad("temperatures must be a non-empty list of values >= 0")
    if o.length_penalty is not None and not 0 <= o.length_penalty <= 1:
        bad("--length-penalty must be between 0 and 1")
    if o.no_speech_threshold is not None and not 0 <= o.no_speech_threshold <= 1:
        bad("--no-speech-threshold must be between 0 and 1")
    if o.max_initial_timestamp < 0:
        bad("--max-initial-timestamp must be >= 0")
    if o.word_timestamps and o.without_timestamps:
        bad("--word-timestamps needs timestamps; drop --without-timestamps")
    if o.vad is not None and o.vad not in VAD_KINDS:
        bad(f"unknown --vad {o.vad!r}; choose {' or '.join(VAD_KINDS)}")
    if o.hallucination_silence_threshold is not None and not o.word_timestamps:
        bad("--hallucination-silence-threshold needs --word-timestamps")
