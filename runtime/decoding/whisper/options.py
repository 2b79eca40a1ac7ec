"""The options of the ``whisper_seq2seq`` decoding family (openai-whisper's), and its declaration."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ...errors import InputError
from ...options import _optional_range, check_range
from ..family import DecodingFamily

# Whisper decoding. Every beam and every sample is one decoder row with its own self-attention KV
# cache (large-v3: 147 MB per row in fp32), so the row count bounds memory: 32 rows of large-v3
# stay under 5 GB, and quality stops improving long before (openai-whisper's default is 5).
MAX_BEAMS = 32
MAX_BEST_OF = 32
MAX_PATIENCE = 10.0  # finished candidates = beam_size * patience; the step limit bounds the rest
MAX_TEMPERATURE = 2.0  # above 2 the softmax over ~52k tokens is close to uniform: noise, not text
MAX_TEMPERATURES = 20  # each is one more decode of a failed window (openai's schedule has 6)
MAX_COMPRESSION_RATIO = 100.0  # gzip ratios of a window's text lie in 1..~50; none switches the check off
MIN_LOGPROB = -100.0  # an average token logprob: <= 0, and above log(float32's tiniest) ~ -103
WINDOW_SECONDS = 30.0  # a Whisper window: the first timestamp and silence thresholds lie within it
@dataclass(frozen=True)
class WhisperDecoding:
    """The decoding section of the ``whisper_seq2seq`` family (openai-whisper's options)."""

    family: ClassVar[str] = "whisper_seq2seq"
    max_beam_size: ClassVar[int] = MAX_BEAMS

    beam_size: int = 5  # beams at temperature 0; 1 is greedy
    best_of: int = 5  # candidates sampled at each temperature above 0
    patience: float = 1.0  # beam search stops after beam_size * patience finished candidates
    length_penalty: float | None = None  # None: rank by sum logprob / length; else Google's alpha
    temperatures: tuple[float, ...] = field(default=(0.0, 0.2, 0.4, 0.6, 0.8, 1.0), metadata={"flag": "--temperature"})  # tried in order while a window fails
    compression_ratio_threshold: float | None = 2.4  # gzip ratio above this: a repetitive, failed window
    logprob_threshold: float | None = -1.0  # average token logprob below this: a failed window
    no_speech_threshold: float | None = 0.6  # no-speech probability above this (and low logprob): silence
    condition_on_previous_text: bool = True  # prompt each window with the text before it
    initial_prompt: str | None = None  # text to prompt the first window with (names, spelling, style)
    hotwords: str | None = None  # faster-whisper's: words put in every window's prompt, before the previous text
    suppress_tokens: tuple[int, ...] = (-1,)  # never emitted; -1 stands for the non-speech symbol set
    suppress_blank: bool = True  # no leading space or end-of-text at the start of a window
    without_timestamps: bool = False  # decode text only (segments then span whole windows)
    max_initial_timestamp: float = 1.0  # seconds: the first timestamp of a window may not start later
    prepend_punctuations: str = "\"'“¿([{-"  # word timestamps: attached to the following word
    append_punctuations: str = "\"'.。,，!！?？:：”)]}、"  # word timestamps: attached to the preceding word
    hallucination_silence_threshold: float | None = None  # seconds of silence around a suspect segment to skip it
    seed: int = 0  # of the samples drawn above temperature 0: the same seed, audio and model give the same text

    def __post_init__(self):
        validate_whisper_decoding(self)

    def check(self, shared) -> None:
        """The rules between this section and the shared ``TranscribeOptions``."""
        if shared.word_timestamps and self.without_timestamps:
            raise InputError("--word-timestamps needs timestamps; drop --without-timestamps")
        if shared.diarize and self.without_timestamps:
            raise InputError("--diarize needs timestamps; drop --without-timestamps")
        if self.hallucination_silence_threshold is not None and not shared.word_timestamps:
            raise InputError("--hallucination-silence-threshold needs --word-timestamps")
        if self.hallucination_silence_threshold is not None and shared.batch_size > 1:
            raise InputError("--hallucination-silence-threshold re-decodes windows one after another; it needs --batch-size 1")


def validate_whisper_decoding(o: WhisperDecoding) -> None:
    def bad(message: str) -> None:
        raise InputError(message)

    check_range(o.beam_size, "--beam-size", 1, MAX_BEAMS, integer=True)
    check_range(o.best_of, "--best-of", 1, MAX_BEST_OF, integer=True)
    check_range(o.seed, "--seed", 0, 2**63 - 1, integer=True)
    check_range(o.patience, "--patience", 0, MAX_PATIENCE, lo_open=True)
    if not isinstance(o.temperatures, (tuple, list)) or not o.temperatures:
        bad("temperatures must be a non-empty list of values >= 0")
    if len(o.temperatures) > MAX_TEMPERATURES:
        bad(f"at most {MAX_TEMPERATURES} temperatures (got {len(o.temperatures)}); use a larger --temperature-increment-on-fallback")
    for t in o.temperatures:
        check_range(t, "--temperature", 0, MAX_TEMPERATURE)
    _optional_range(o.length_penalty, "--length-penalty", 0, 1)
    _optional_range(o.compression_ratio_threshold, "--compression-ratio-threshold", 0, MAX_COMPRESSION_RATIO, lo_open=True)
    _optional_range(o.logprob_threshold, "--logprob-threshold", MIN_LOGPROB, 0)
    _optional_range(o.no_speech_threshold, "--no-speech-threshold", 0, 1)
    check_range(o.max_initial_timestamp, "--max-initial-timestamp", 0, WINDOW_SECONDS, unit="s")
    _optional_range(o.hallucination_silence_threshold, "--hallucination-silence-threshold", 0, WINDOW_SECONDS, lo_open=True, unit="s")
    if not isinstance(o.suppress_tokens, (tuple, list)):
        bad("suppress_tokens must be a list of token ids")
    for token in o.suppress_tokens:
        # The upper end is the model's vocabulary, checked once it is loaded (pipelines.transcribe.whisper).
        check_range(token, "--suppress-tokens ids", -1, integer=True)


FAMILY = DecodingFamily(
    options=WhisperDecoding,
    engine="oasr.pipelines.transcribe.whisper:Engine",
    verify="oasr.quant.verify:verify_whisper",
    can_do="beam search or sampling with temperature fallback, prompts, timestamps and word timestamps",
)
