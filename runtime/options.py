"""Task options: frozen dataclasses, validated in one place. CLI flags map onto these fields."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InputError

SPEECH_TASKS = ("transcribe", "translate")  # what TranscribeOptions.task takes (not the built tasks of oasr.tasks)
VAD_KINDS = ("energy", "silero")
# Language codes a model may be asked for (Whisper's set, the widest of the built-in families);
# a model that knows fewer says so once loaded.
LANGUAGES = tuple(
    "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th ur hr bg lt "
    "la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr pa si km sn yo so af oc "
    "ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt haw ln ha ba jw su yue".split()
)
# openai-whisper's language names (`-l English`), in the order of LANGUAGES, then its other spellings.
_NAMES = (
    "english chinese german spanish russian korean french japanese portuguese turkish polish catalan dutch arabic "
    "swedish italian indonesian hindi finnish vietnamese hebrew ukrainian greek malay czech romanian danish "
    "hungarian tamil norwegian thai urdu croatian bulgarian lithuanian latin maori malayalam welsh slovak telugu "
    "persian latvian bengali serbian azerbaijani slovenian kannada estonian macedonian breton basque icelandic "
    "armenian nepali mongolian bosnian kazakh albanian swahili galician marathi punjabi sinhala khmer shona yoruba "
    "somali afrikaans occitan georgian belarusian tajik sindhi gujarati amharic yiddish lao uzbek faroese "
    "haitian_creole pashto turkmen nynorsk maltese sanskrit luxembourgish myanmar tibetan tagalog malagasy "
    "assamese tatar hawaiian lingala hausa bashkir javanese sundanese cantonese"
)
LANGUAGE_NAMES = {name.replace("_", " "): code for name, code in zip(_NAMES.split(), LANGUAGES)} | {
    "burmese": "my", "valencian": "ca", "flemish": "nl", "haitian": "ht", "letzeburgesch": "lb", "pushto": "ps",
    "panjabi": "pa", "moldavian": "ro", "moldovan": "ro", "sinhalese": "si", "castilian": "es", "mandarin": "zh",
}


def language_code(text: str) -> str:
    """A language code from a code or one of openai-whisper's names, any case (``English`` -> ``en``);
    anything else comes back as given, for the options' check to refuse."""
    key = " ".join(text.strip().lower().replace("_", " ").split())
    return LANGUAGE_NAMES.get(key, key if key in LANGUAGES else text.strip())


# --- bounds -------------------------------------------------------------------------------------
# Every numeric option has a finite, documented range, checked by its dataclass's validate
# function before any work starts (NaN and infinities are refused everywhere): a value outside it
# is an InputError naming the flag and the range, which the CLI reports as a usage error (exit 2).


def _show(value) -> str:
    return f"{value:g}" if isinstance(value, float) else repr(value)


def check_range(value, name: str, lo=None, hi=None, *, integer: bool = False, lo_open: bool = False, hi_open: bool = False, unit: str = "") -> None:
    """Raise an InputError unless ``value`` is a finite number (a whole one when ``integer``)
    within [lo, hi] (an end left open by ``lo_open`` / ``hi_open``; None: no bound that side)."""
    if integer:
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise InputError(f"{name} must be a whole number (got {_show(value)})")
    elif not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(value):
        raise InputError(f"{name} must be a finite number (got {_show(value)})")
    if (lo is None or (value > lo if lo_open else value >= lo)) and (hi is None or (value < hi if hi_open else value <= hi)):
        return
    u = f" {unit}" if unit else ""
    if lo is not None and hi is not None and not (integer or lo_open or hi_open):
        text = f"between {lo:g}{u} and {hi:g}{u}"
    else:
        parts = []
        if lo is not None:
            parts.append(f"{'above' if lo_open else 'at least'} {lo:g}{u}")
        if hi is not None:
            parts.append(f"{'under' if hi_open else 'at most'} {hi:g}{u}")
        text = " and ".join(parts)
    raise InputError(f"{name} must be {text} (got {_show(value)})")


def _optional_range(value, name: str, *args, **kwargs) -> None:
    if value is not None:
        check_range(value, name, *args, **kwargs)


# Shared by every transcription family. Encoder-only families: one chunk's attention is quadratic
# in its length (120 s of wav2vec2: 6000 frames, 144 MB per head); chunks of under a second are
# mostly overlap.
MIN_CHUNK_SECONDS, MAX_CHUNK_SECONDS = 1.0, 120.0
MAX_CHUNK_OVERLAP = 60.0  # seconds, and under half the chunk
MAX_TRANSCRIBE_BATCH = 64  # chunks per forward pass: batch x chunk bounds memory
MAX_BEAM_SIZE = 64  # the widest search of any family (each family narrows it: Whisper's 32)


@dataclass(frozen=True)
class TranscribeOptions:
    """What every transcription family shares, and the options of the model's decoding family."""

    task: str = "transcribe"  # or "translate" (to English)
    language: str | None = None  # a language code; None: the model's own, or detected where it can
    word_timestamps: bool = False  # per-word start and end times
    vad: str | None = None  # skip non-speech before decoding: "energy" (built in) or "silero"
    # --vad silero's settings (threshold, silence that ends speech, padding); None: faster-whisper's
    # for decoding (only silences of 2 s or more cut, 0.4 s kept around speech)
    vad_options: VadOptions | None = None
    diarize: bool = False  # a speaker on every segment (oasr.diarize), segments split where the speaker changes
    # With diarize: the diarization's speaker counts and names (one speaker at a time is always
    # asked for: each word gets one speaker); None: DiarizeOptions' defaults.
    diarization: Any = None
    # Encoder-only families run long audio in chunks: seconds per chunk and of overlap between
    # neighbours (None: the family's defaults); Whisper's own 30 s windows ignore them.
    chunk_length: float | None = None
    chunk_overlap: float | None = None
    # Chunks per forward pass (encoder-only families); Whisper: above 1, VAD windows decoded that
    # many at a time without conditioning on previous text (faster-whisper's batched pipeline).
    batch_size: int = 1
    # Beams of the model's search (every family with one takes it, within its own range); None:
    # the family's default.
    beam_size: int | None = None
    # The model's decoding family's own options: its section (a frozen dataclass of the family,
    # such as oasr.WhisperDecoding), or a mapping of option names to values (the CLI's decoding
    # flags, --decoding-option KEY=VALUE): values that one installed family alone takes become its
    # section here, others stay a mapping that the model's family reads once it is known; None:
    # the defaults of whichever family the model has. See oasr.decoding.family.
    decoding: Any = None

    def __post_init__(self):
        if isinstance(self.decoding, Mapping):
            object.__setattr__(self, "decoding", dict(self.decoding))
        validate_transcribe_options(self)
        if isinstance(self.decoding, dict) and self.decoding:
            from .decoding.family import read_values

            # Checked before any model loads; values only one installed family takes are its
            # section already (the shared beam folded in).
            section, beam_folded = read_values(self)
            if section is not None:
                object.__setattr__(self, "decoding", section)
                if beam_folded:
                    object.__setattr__(self, "beam_size", None)


def validate_transcribe_options(o: TranscribeOptions) -> None:
    def bad(message: str) -> None:
        raise InputError(message)

    if o.task not in SPEECH_TASKS:
        bad(f"unknown task {o.task!r}; choose {' or '.join(SPEECH_TASKS)}")
    if o.language is not None and o.language not in LANGUAGES:
        bad(f"unknown language code {o.language!r}; use a code such as en, de, fr, zh (one of {len(LANGUAGES)})")
    if o.vad is not None and o.vad not in VAD_KINDS:
        bad(f"unknown --vad {o.vad!r}; choose {' or '.join(VAD_KINDS)}")
    if o.vad_options is not None and o.vad != "silero":
        bad("--vad-threshold, --min-silence-duration-ms and --speech-pad-ms tune Silero VAD; add --vad silero")
    _optional_range(o.chunk_length, "--chunk-length", MIN_CHUNK_SECONDS, MAX_CHUNK_SECONDS, unit="s")
    _optional_range(o.chunk_overlap, "--chunk-overlap", 0, MAX_CHUNK_OVERLAP, unit="s")
    if o.chunk_overlap is not None and o.chunk_length and o.chunk_overlap * 2 >= o.chunk_length:
        bad("--chunk-overlap must be >= 0 and under half the chunk length")
    check_range(o.batch_size, "--batch-size", 1, MAX_TRANSCRIBE_BATCH, integer=True)
    if o.diarization is not None:
        if not isinstance(o.diarization, DiarizeOptions):
            bad(f"diarization must be a DiarizeOptions, not {_show(o.diarization)}")
        if not o.diarize:
            bad("speaker counts and names (--num-speakers, --min-speakers, --max-speakers, --speaker-names) need --diarize")
    _optional_range(o.beam_size, "--beam-size", 1, MAX_BEAM_SIZE, integer=True)
    d = o.decoding
    if d is not None and not isinstance(d, dict):  # a mapping is read by __post_init__
        if not isinstance(getattr(d, "family", None), str) or not dataclasses.is_dataclass(d):
            bad(f"decoding must be a family's options section (such as WhisperDecoding) or a mapping, not {type(d).__name__}")
        check = getattr(d, "check", None)
        if check is not None:
            check(o)


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


MAX_VAD_SECONDS = 60.0  # a VAD duration (speech, silence, padding) beyond a minute decides nothing about speech
MAX_SPEECH_REGION = 3600.0  # seconds: over-long regions are split; an hour is never one utterance


def validate_vad_options(o: VadOptions) -> None:
    def bad(message: str) -> None:
        raise InputError(message)

    check_range(o.threshold, "the VAD threshold (--vad-threshold)")  # finite; the range just below
    if not 0 < o.threshold < 1:
        bad("the VAD threshold must lie between 0 and 1")
    if o.neg_threshold is not None and not 0 < o.neg_threshold <= o.threshold:
        bad("the VAD's negative threshold must lie in (0, threshold]")
    durations = (
        ("the VAD's minimum speech", o.min_speech_s),
        ("the VAD's minimum silence", o.min_silence_s),
        ("the VAD's padding", o.speech_pad_s),
        ("the VAD's minimum silence at a split", o.min_silence_at_max_speech_s),
    )
    for name, value in durations:
        check_range(value, name, None, MAX_VAD_SECONDS, unit="s")  # finite, at most a minute
        if value < 0:
            bad(f"VAD durations (minimum speech, minimum silence, padding) must be >= 0; {name} is {value:g}")
    if o.max_speech_s is not None:
        check_range(o.max_speech_s, "the VAD's maximum speech duration", 0, MAX_SPEECH_REGION, unit="s")
        if o.max_speech_s <= 0.032 + 2 * o.speech_pad_s:
            bad("the VAD's maximum speech duration must exceed one 32 ms chunk plus twice the padding")


# faster-whisper's Silero settings for decoding (--vad silero): only silences of 2 s or more are cut,
# and 0.4 s of context is kept around the speech (--vad-threshold and the others change them)
DECODING_VAD = VadOptions(min_speech_s=0.0, min_silence_s=2.0, speech_pad_s=0.4)


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


PITCH_MIN_HOP, PITCH_MAX_HOP = 0.0625, 1000.0  # ms: one 16 kHz sample (torchcrepe's finest) to a frame a second
PITCH_MIN_DB = -200.0  # dBFS: the level of digital silence here (LEVEL_FLOOR); a lower gate gates nothing
PITCH_MAX_BATCH = 8192  # frames per pass: twice the largest default; crepe-full holds ~1 MB per frame in layer 1


def validate_pitch_options(o: PitchOptions) -> None:
    def bad(message: str) -> None:
        raise InputError(message)

    check_range(o.hop, "--hop", None, PITCH_MAX_HOP, unit="ms")  # finite; the lower end just below
    if not o.hop >= PITCH_MIN_HOP or abs(o.hop * 16 - round(o.hop * 16)) > 1e-6:
        bad(f"--hop {o.hop:g} ms is not a positive whole number of 16 kHz samples (a multiple of 0.0625 ms)")
    check_range(o.fmin, "--fmin", unit="Hz")  # finite; CREPE's range just below
    check_range(o.fmax, "--fmax", unit="Hz")
    if o.decoder not in PITCH_DECODERS:
        bad(f"unknown --decoder {o.decoder!r}; choose {', '.join(PITCH_DECODERS)}")
    if not PITCH_FMIN <= o.fmin < o.fmax <= PITCH_FMAX:
        bad(f"--fmin and --fmax must satisfy {PITCH_FMIN} <= fmin < fmax <= {PITCH_FMAX} Hz (CREPE's range)")
    check_range(o.voicing_threshold, "--voicing-threshold", 0, 1)
    if o.silence_db is not None:
        check_range(o.silence_db, "--silence-db", None, None, unit="dBFS")  # finite
        if not PITCH_MIN_DB <= o.silence_db <= 0:
            bad(f"--silence-db must be at most 0 dBFS and at least {PITCH_MIN_DB:g} (or none: no silence gating); got {o.silence_db:g}")
    _optional_range(o.batch_size, "--batch-size", 1, PITCH_MAX_BATCH, integer=True)


@dataclass(frozen=True)
class DiarizeOptions:
    """pyannote 3.1's recipe. step, threshold, min_cluster_size, min_embed_seconds and onset were
    tuned by pooled DER (collar 0.25) on training material only: the AMI excerpts trn01-trn09 and
    40 files of two or three of those meetings end to end, never the files the tests score (dev00,
    dev01, sample.wav), with each speaker encoder (issue 29, CAM++: onset None/0.35/0.25,
    min_embed_seconds 0.5/1/2, overlap kept out of embeddings or not, threshold 0.1-1.05, min size
    1-4, average or centroid linkage; benchmarks/diarize_tune.py --long --pairs --grid)."""

    num_speakers: int | None = None  # exactly this many speakers; None estimates the count
    min_speakers: int = 1  # the estimate stays within [min_speakers, max_speakers]
    max_speakers: int | None = None  # None: no upper bound
    step: float = 2.5  # seconds between the starts of the 10 s segmentation windows
    # Cosine distance at which clusters of local speakers stop merging, and the fewest local
    # speakers a cluster keeps (smaller ones fold into the nearest larger one); None: the values
    # tuned for the speaker encoder (oasr.pipelines.diarize.TUNED), each encoder's distances
    # being its own.
    threshold: float | None = None
    min_cluster_size: int | None = None
    min_embed_seconds: float = 1.0  # a local speaker with less speech is not embedded (assigned only)
    # A local speaker is active where the probability of the powerset classes holding it reaches
    # this; None: where the most likely class holds it (pyannote's rule, which misses more of
    # far-field speech).
    onset: float | None = 0.25
    exclusive: bool = False  # one speaker per instant (overlaps given to the most active speaker)
    # Labels for the speakers in order of first appearance (the first to speak is the first name);
    # speakers beyond the names keep SPEAKER_NN. Empty: SPEAKER_00, SPEAKER_01, ...
    speaker_names: tuple[str, ...] = ()

    def __post_init__(self):
        if isinstance(self.speaker_names, (list, str)):  # a list from JSON or the API; a comma-separated string
            names = self.speaker_names.split(",") if isinstance(self.speaker_names, str) else self.speaker_names
            object.__setattr__(self, "speaker_names", tuple(n.strip() if isinstance(n, str) else n for n in names))
        validate_diarize_options(self)


# Speakers: AMI meetings have 4, DIHARD recordings up to ~10; the clustering is quadratic in the
# number of local speakers, not in the count.
MAX_SPEAKERS = 32
# Windows: one 10 s segmentation window every --step seconds; below 0.5 s a minute costs 120 windows.
DIARIZE_MIN_STEP, DIARIZE_MAX_STEP = 0.5, 10.0
MAX_CLUSTER_SIZE = 1000
MAX_EMBED_SECONDS = 10.0  # a window is 10 s


def validate_diarize_options(o: DiarizeOptions) -> None:
    def bad(message: str) -> None:
        raise InputError(message)

    _optional_range(o.num_speakers, "--num-speakers", 1, MAX_SPEAKERS, integer=True)
    check_range(o.min_speakers, "--min-speakers", 1, MAX_SPEAKERS, integer=True)
    if o.max_speakers is not None:
        check_range(o.max_speakers, "--max-speakers", 1, MAX_SPEAKERS, integer=True)
        if o.max_speakers < o.min_speakers:
            bad("--max-speakers must be at least --min-speakers")
    if o.num_speakers is not None and (o.min_speakers != 1 or o.max_speakers is not None):
        bad("give --num-speakers, or --min-speakers/--max-speakers, not both")
    if o.threshold is not None and not (isinstance(o.threshold, numbers.Real) and 0 < o.threshold < 2):  # NaN fails too
        bad(f"--threshold must lie between 0 and 2 (cosine distance); got {_show(o.threshold)}")
    check_range(o.step, "--step", DIARIZE_MIN_STEP, DIARIZE_MAX_STEP, unit="s")
    _optional_range(o.min_cluster_size, "min_cluster_size", 1, MAX_CLUSTER_SIZE, integer=True)
    check_range(o.min_embed_seconds, "min_embed_seconds", 0, MAX_EMBED_SECONDS, unit="s")
    if o.onset is not None and not (isinstance(o.onset, numbers.Real) and 0 < o.onset < 1):
        bad(f"--onset must lie between 0 and 1 (a probability); got {_show(o.onset)}")
    if not isinstance(o.exclusive, bool):
        bad(f"exclusive must be True or False, not {_show(o.exclusive)}")
    names = o.speaker_names
    if not isinstance(names, tuple) or not all(isinstance(n, str) for n in names):
        bad(f"--speaker-names must be names separated by commas, not {_show(names)}")
    for n in names:  # an RTTM field: one token, no spaces
        if not n or any(c.isspace() for c in n):
            bad(f"--speaker-names: {n!r} is not a name (empty or with spaces); separate names with commas, as A,B,C")
    if len(set(names)) != len(names):
        bad(f"--speaker-names names a speaker twice: {','.join(names)}")
    if len(names) > MAX_SPEAKERS:
        bad(f"--speaker-names gives {len(names)} names; at most {MAX_SPEAKERS}")
    if o.num_speakers is not None and len(names) > o.num_speakers:
        bad(f"--speaker-names gives {len(names)} names for --num-speakers {o.num_speakers}")


# Speech synthesis (Piper/VITS). Speed divides the voice's length_scale: 0.25 is four times
# slower, 4 four times faster (beyond, phonemes last under a frame or the voice drawls). Noise
# above 2 turns speech into babble; a sentence pause over 10 s is a recording gap, not a pause.
TTS_MIN_SPEED, TTS_MAX_SPEED = 0.25, 4.0
TTS_MAX_NOISE = 2.0
TTS_MAX_SILENCE = 10.0
TTS_MAX_SPEAKER = 100_000  # ids: Piper's largest voices hold ~900 speakers


@dataclass(frozen=True)
class SynthesizeOptions:
    speaker: int | str | None = None  # multi-speaker voices: an id or a name from the voice; None: its first
    speed: float = 1.0  # 2.0 speaks twice as fast (the voice's length_scale divided by it)
    noise_scale: float | None = None  # variation of the voice; None: the voice's own (0.667 for most)
    noise_w: float | None = None  # variation of the phoneme durations; None: the voice's own (0.8)
    sentence_silence: float = 0.0  # seconds of silence after each sentence
    phonemes: bool = False  # the text is phonemes already (Piper's IPA symbols), not words
    seed: int = 0  # of the noise: the same seed and text give the same audio

    def __post_init__(self):
        validate_synthesize_options(self)


def validate_synthesize_options(o: SynthesizeOptions) -> None:
    if o.speaker is not None and not isinstance(o.speaker, str):
        check_range(o.speaker, "--speaker", 0, TTS_MAX_SPEAKER, integer=True)
    check_range(o.speed, "--speed", TTS_MIN_SPEED, TTS_MAX_SPEED)
    _optional_range(o.noise_scale, "--noise-scale", 0, TTS_MAX_NOISE)
    _optional_range(o.noise_w, "--noise-w", 0, TTS_MAX_NOISE)
    check_range(o.sentence_silence, "--sentence-silence", 0, TTS_MAX_SILENCE, unit="s")
    if not isinstance(o.phonemes, bool):
        raise InputError(f"phonemes must be True or False, not {_show(o.phonemes)}")
    check_range(o.seed, "--seed", 0, 2**63 - 1, integer=True)


SEPARATE_CLIPS = ("rescale", "clamp", "none")
SEPARATE_MAX_SHIFTS = 20  # each shift is one more full separation; demucs suggests up to 10
SEPARATE_MAX_BATCH = 64  # segments per forward pass


@dataclass(frozen=True)
class SeparateOptions:
    stems: tuple[str, ...] | None = None  # the sources to write, by name; None: all of the model's
    two_stems: str | None = None  # write this source and "no_<it>" (the sum of the others) only
    segment: float | None = None  # seconds per window; None: the model's (at most that for HTDemucs)
    overlap: float = 0.25  # fraction of a window shared with the next, crossfaded by triangular weights
    shifts: int = 1  # random time offsets (up to 0.5 s) averaged, as demucs' --shifts; 0: none
    seed: int = 0  # of the shifts' offsets (Python's random, drawn as demucs draws them)
    clip: str = "rescale"  # per stem: "rescale" (divide by max(1.01 * peak, 1)), "clamp" (to +-0.99), "none"
    batch_size: int = 1  # windows per forward pass

    def __post_init__(self):
        if self.stems is not None:
            object.__setattr__(self, "stems", tuple(self.stems))
        validate_separate_options(self)


def validate_separate_options(o: SeparateOptions) -> None:
    if o.stems is not None and (not o.stems or not all(isinstance(s, str) and s for s in o.stems)):
        raise InputError(f"--stems must name one or more sources, got {_show(o.stems)}")
    if o.stems is not None and o.two_stems is not None:
        raise InputError("--stems and --two-stems do not go together: --two-stems X writes X and no_X")
    if o.two_stems is not None and not (isinstance(o.two_stems, str) and o.two_stems):
        raise InputError(f"--two-stems must name a source, got {_show(o.two_stems)}")
    _optional_range(o.segment, "--segment", 0, None, unit="s", lo_open=True)
    check_range(o.overlap, "--overlap", 0, 1, hi_open=True)
    check_range(o.shifts, "--shifts", 0, SEPARATE_MAX_SHIFTS, integer=True)
    check_range(o.seed, "--seed", 0, 2**63 - 1, integer=True)
    if o.clip not in SEPARATE_CLIPS:
        raise InputError(f"unknown --clip {o.clip!r}; choose {', '.join(SEPARATE_CLIPS)}")
    check_range(o.batch_size, "--batch-size", 1, SEPARATE_MAX_BATCH, integer=True)
