"""Task options: frozen dataclasses, validated in one place. CLI flags map onto these fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .errors import CapabilityError, InputError

SPEECH_TASKS = ("transcribe", "translate")  # what TranscribeOptions.task takes (not the built tasks of oasr.tasks)
VAD_KINDS = ("energy", "silero")
# Language codes a model may be asked for (Whisper's set, the widest of the built-in families);
# a model that knows fewer says so once loaded.
LANGUAGES = tuple(
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th ur hr bg lt "
    "la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr pa si km sn yo so af oc "
    "ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt haw ln ha ba jw su yue".split()
)


@dataclass(frozen=True)
class WhisperDecoding:
    """The decoding section of the ``whisper_seq2seq`` family (openai-whisper's options)."""

    family: ClassVar[str] = "whisper_seq2seq"

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
    prepend_punctuations: str = "\"'“¿([{-"  # word timestamps: attached to the following word
    append_punctuations: str = "\"'.。,，!！?？:：”)]}、"  # word timestamps: attached to the preceding word
    hallucination_silence_threshold: float | None = None  # seconds of silence around a suspect segment to skip it

    def __post_init__(self):
        validate_whisper_decoding(self)


def validate_whisper_decoding(o: WhisperDecoding) -> None:
    def bad(message: str) -> None:
        raise InputError(message)

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


@dataclass(frozen=True)
class TranscribeOptions:
    """What every transcription family shares, and one family-specific ``decoding`` section."""

    task: str = "transcribe"  # or "translate" (to English)
    language: str | None = None  # a language code; None: the model's own, or detected where it can
    word_timestamps: bool = False  # per-word start and end times
    vad: str | None = None  # skip non-speech before decoding: "energy" (built in) or "silero"
    diarize: bool = False  # a speaker on every segment (oasr.diarize), segments split where the speaker changes
    # Encoder-only families run long audio in chunks: seconds per chunk and of overlap between
    # neighbours (None: the family's defaults); Whisper's own 30 s windows ignore them.
    chunk_length: float | None = None
    chunk_overlap: float | None = None
    batch_size: int = 1  # chunks per forward pass (encoder-only families)
    # One family's section (a frozen dataclass naming its ``family``, e.g. WhisperDecoding); None: the
    # defaults of whichever family the model has. ctc has no section yet (greedy: nothing to set).
    decoding: WhisperDecoding | None = None

    def __post_init__(self):
        validate_transcribe_options(self)

    def decoding_for(self, family: str, default=None):
        """The decoding section for a model of ``family``: the one given, else ``default``; a
        section of another family is an error (its flags would be silently ignored)."""
        if self.decoding is None:
            return default
        if self.decoding.family != family:
            raise CapabilityError(
                f"{type(self.decoding).__name__} options were given (decoding flags of the {self.decoding.family} "
                f"family), but this model decodes as the {family} family"
            )
        return self.decoding


def validate_transcribe_options(o: TranscribeOptions) -> None:
    def bad(message: str) -> None:
        raise InputError(message)

    if o.task not in SPEECH_TASKS:
        bad(f"unknown task {o.task!r}; choose {' or '.join(SPEECH_TASKS)}")
    if o.language is not None and o.language not in LANGUAGES:
        bad(f"unknown language code {o.language!r}; use a code such as en, de, fr, zh (one of {len(LANGUAGES)})")
    if o.vad is not None and o.vad not in VAD_KINDS:
        bad(f"unknown --vad {o.vad!r}; choose {' or '.join(VAD_KINDS)}")
    if o.chunk_length is not None and o.chunk_length <= 0:
        bad("--chunk-length must be positive")
    if o.chunk_overlap is not None and (o.chunk_overlap < 0 or (o.chunk_length and o.chunk_overlap * 2 >= o.chunk_length)):
        bad("--chunk-overlap must be >= 0 and under half the chunk length")
    if o.batch_size < 1:
        bad("--batch-size must be at least 1")
    d = o.decoding
    if d is not None and not isinstance(getattr(d, "family", None), str):
        bad(f"decoding must be a family's options section (such as WhisperDecoding), not {type(d).__name__}")
    if isinstance(d, WhisperDecoding):
        if o.word_timestamps and d.without_timestamps:
            bad("--word-timestamps needs timestamps; drop --without-timestamps")
        if o.diarize and d.without_timestamps:
            bad("--diarize needs timestamps; drop --without-timestamps")
        if d.hallucination_silence_threshold is not None and not o.word_timestamps:
            bad("--hallucination-silence-threshold needs --word-timestamps")


@dataclass(frozen=True)
class VadOptions:
    """Silero VAD's speech regions from its probabilities; defaults as silero-vad's get_speech_timestamps."""

    threshold: float = 0.5  # a chunk at or above this probability starts (or continues) speech
    neg_threshold: float | None = None  # inside speech, a chunk below this is silence; None: threshold - 0.15
    min_speech_s: float = 0.25  # shorter speech regions are dropped
    min_silence_s: float = 0.1  # silence must last this long to end a region
    speech_pad_s: float = 0.03  # added on each side of a region (halved between close regions)
    max_speech_s: float | None = None  # longer regions are split (at their longest silence); None: never
    min_silence_at_max_speech_s: float = 0.098  # silences shorter than this are no split points
    split_at_longest_silence: bool = True  # split an over-long region at its longest silence, not its last

    def __post_init__(self):
        validate_vad_options(self)

    @property
    def negative_threshold(self) -> float:
        return max(self.threshold - 0.15, 0.01) if self.neg_threshold is None else self.neg_threshold


def validate_vad_options(o: VadOptions) -> None:
    def bad(message: str) -> None:
        raise InputError(message)

    if not 0 < o.threshold < 1:
        bad("the VAD threshold must lie between 0 and 1")
    if o.neg_threshold is not None and not 0 < o.neg_threshold <= o.threshold:
        bad("the VAD's negative threshold must lie in (0, threshold]")
    if min(o.min_speech_s, o.min_silence_s, o.speech_pad_s, o.min_silence_at_max_speech_s) < 0:
        bad("VAD durations (minimum speech, minimum silence, padding) must be >= 0")
    if o.max_speech_s is not None and o.max_speech_s <= 0.032 + 2 * o.speech_pad_s:
        bad("the VAD's maximum speech duration must exceed one 32 ms chunk plus twice the padding")


PITCH_DECODERS = ("weighted", "viterbi", "argmax")
PITCH_FMIN, PITCH_FMAX = 31.7, 2006.0  # Hz: the centres of CREPE's lowest and highest bins, rounded inwards


@dataclass(frozen=True)
class PitchOptions:
    hop: float = 10.0  # milliseconds between frame centres: a whole number of 16 kHz samples (1/16 ms)
    decoder: str = "weighted"  # "weighted" (CREPE's local average), "viterbi" (torchcrepe's), "argmax"
    fmin: float = 50.0  # Hz: lower bins are never chosen (torchcrepe's default)
    fmax: float = PITCH_FMAX  # Hz: higher bins are never chosen
    voicing_threshold: float = 0.5  # a frame is voiced when its confidence (decoded bin's activation) reaches this
    silence_db: float | None = -60.0  # quieter frames (dBFS RMS of the 1024-sample window): unvoiced, confidence 0
    batch_size: int | None = None  # frames per forward pass; None: by capacity and device

    def __post_init__(self):
        validate_pitch_options(self)

    @property
    def hop_samples(self) -> int:
        return round(self.hop * 16)


def validate_pitch_options(o: PitchOptions) -> None:
    def bad(message: str) -> None:
        raise InputError(message)

    if not o.hop > 0 or abs(o.hop * 16 - round(o.hop * 16)) > 1e-6:
        bad(f"--hop {o.hop:g} ms is not a positive whole number of 16 kHz samples (a multiple of 0.0625 ms)")
    if o.decoder not in PITCH_DECODERS:
        bad(f"unknown --decoder {o.decoder!r}; choose {', '.join(PITCH_DECODERS)}")
    if not PITCH_FMIN <= o.fmin < o.fmax <= PITCH_FMAX:
        bad(f"--fmin and --fmax must satisfy {PITCH_FMIN} <= fmin < fmax <= {PITCH_FMAX} Hz (CREPE's range)")
    if not 0 <= o.voicing_threshold <= 1:
        bad("--voicing-threshold must be between 0 and 1")
    if o.silence_db is not None and not o.silence_db <= 0:
        bad("--silence-db must be at most 0 dBFS (or none: no silence gating)")
    if o.batch_size is not None and o.batch_size < 1:
        bad("--batch-size must be at least 1")


CLUSTERING = ("agglomerative", "spectral")


@dataclass(frozen=True)
class DiarizeOptions:
    """Defaults tuned on the AMI excerpts and sample.wav of the test data (tests/test_diarize.py)."""

    clustering: str = "spectral"  # "spectral" (count from the eigengap) or "agglomerative" (a threshold)
    num_speakers: int | None = None  # exactly this many speakers; None estimates the count
    min_speakers: int = 1  # the estimate stays within [min_speakers, max_speakers]
    max_speakers: int | None = None  # None: no upper bound (agglomerative), 8 (spectral)
    threshold: float = 0.3  # agglomerative: cosine distance at which clusters stop merging
    spectral_prune: float = 0.8  # spectral: share of each affinity row set to zero (weakest first)
    window: float = 1.5  # seconds of speech per embedding (one 1.6 s GE2E partial)
    step: float = 0.5  # seconds between window starts
    min_window: float = 0.4  # speech regions shorter than this are not embedded (nearest window's speaker)
    min_speaker_windows: int = 3  # an estimated speaker heard in fewer windows is merged into the others
    min_turn: float = 0.5  # seconds: shorter turns touching another speaker's are given to it
    merge_gap: float = 0.5  # seconds: same-speaker turns closer than this are joined
    # Speech regions: a lower threshold and wider padding than silero's defaults (0.5, 30 ms) miss
    # less of far-field meeting speech; the clustering tolerates the extra non-speech.
    vad: VadOptions = VadOptions(threshold=0.3, speech_pad_s=0.3)

    def __post_init__(self):
        validate_diarize_options(self)


def validate_diarize_options(o: DiarizeOptions) -> None:
    def bad(message: str) -> None:
        raise InputError(message)

    if o.clustering not in CLUSTERING:
        bad(f"unknown --clustering {o.clustering!r}; choose {' or '.join(CLUSTERING)}")
    if o.num_speakers is not None and o.num_speakers < 1:
        bad("--num-speakers must be at least 1")
    if o.min_speakers < 1:
        bad("--min-speakers must be at least 1")
    if o.max_speakers is not None and o.max_speakers < o.min_speakers:
        bad("--max-speakers must be at least --min-speakers")
    if o.num_speakers is not None and (o.min_speakers != 1 or o.max_speakers is not None):
        bad("give --num-speakers, or --min-speakers/--max-speakers, not both")
    if not 0 < o.threshold < 2:
        bad("--threshold must lie between 0 and 2 (cosine distance)")
    if not 0 <= o.spectral_prune < 1:
        bad("spectral_prune must lie in [0, 1)")
    if o.window <= 0 or o.step <= 0 or o.step > o.window:
        bad("windows need 0 < step <= window")
    if not 0 <= o.min_window <= o.window:
        bad("min_window must lie between 0 and window")
    if o.min_speaker_windows < 1:
        bad("min_speaker_windows must be at least 1")
    if o.min_turn < 0 or o.merge_gap < 0:
        bad("min_turn and merge_gap must be >= 0")
