"""oasr transcribe -m MODEL -f AUDIO [-f AUDIO ...]

Policy only: flags -> TranscribeOptions (the shared fields, and the decoding flags set away from
their defaults, by name, for the model's decoding family to read once it is loaded), the formats
asked for, then one ``run_inputs`` (``oasr_cli.inputs``: where each transcript goes, the inputs,
the progress bar). Decoding is ``oasr.transcribe``; the file
formats ``oasr.formats``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from enum import Enum
from typing import Annotated, Optional

import typer

from oasr.formats import MAX_LINE_COUNT, MAX_LINE_WIDTH
from oasr.decoding.whisper.options import (
    MAX_BEAMS,
    MAX_BEST_OF,
    MAX_COMPRESSION_RATIO,
    MAX_PATIENCE,
    MAX_TEMPERATURE,
    MAX_TEMPERATURES,
    MIN_LOGPROB,
    WINDOW_SECONDS,
    WhisperDecoding,
)
from oasr.options import DECODING_VAD, MAX_BEAM_SIZE, MAX_TRANSCRIBE_BATCH, SPEECH_TASKS, VAD_KINDS, TranscribeOptions, VadOptions, language_code

from ..inputs import InputFlags, InputJob, audio_command, flag_values, plan_outputs, run_inputs
from ..options import LanguageOpt, ModelOpt, checked, format_choices, format_option, from_flags, number_or_none, usage
from ..speakers import MaxSpeakersOpt, MinSpeakersOpt, NumSpeakersOpt, SpeakerNamesOpt, diarization_options

log = logging.getLogger("oasr")

DEFAULTS = TranscribeOptions()
DECODING_DEFAULTS = WhisperDecoding()  # the defaults the Whisper flags show (other families have their own)
OutputFormat = format_choices("transcript", "all")
Task = Enum("Task", {name: name for name in SPEECH_TASKS}, type=str)
Vad = Enum("Vad", {name: name for name in VAD_KINDS}, type=str)

DECODING = "Decoding (every model)"
WHISPER = "Decoding: Whisper models only"
TRANSDUCER = "Decoding: transducers only (RNN-T, TDT, hybrid)"
SPEECH_LLM = "Decoding: speech LLMs only (Qwen2-Audio)"
VAD = "Voice activity (--vad)"
TIMESTAMPS = "Timestamps"
OUTPUT = "Output"

EXAMPLES = """Examples:

The text of a recording on stdout (the default model, the language detected):
  oasr transcribe talk.wav

German subtitles of every recording into subs/, with the model loaded once:
  oasr transcribe -m whisper-base -l de -F srt --output-dir subs *.wav

Every format of one recording, with per-word times (talk.txt, talk.srt, talk.json, ...):
  oasr transcribe --word-timestamps -F all -o talk.srt talk.wav

As whisper and faster-whisper spell it (short model names, language names, underscores, compute types):
  oasr transcribe -m large-v3 -l English --output_dir subs --output_format srt --word_timestamps True --compute-type int8 talk.wav

Silero VAD with faster-whisper's parameters, and hotwords:
  oasr transcribe --vad silero --vad-threshold 0.4 --min-silence-duration-ms 500 --speech-pad-ms 200 --hotwords "Kubernetes" talk.wav

Translate speech read from stdin into English, as JSON:
  ffmpeg -i talk.mp4 -f wav - | oasr transcribe --task translate --json -
"""


# --- flag parsers ---------------------------------------------------------------------------------


def _token_list(text: str) -> tuple[int, ...]:
    """'-1' (the non-speech symbols), '' (nothing), or a comma-separated list of token ids."""
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a comma-separated list of token ids", param_hint="'--suppress-tokens'") from None


def temperature_schedule(start: float, increment: float | None) -> tuple[float, ...]:
    """openai-whisper's fallback schedule: start, start+inc, ... up to 1.0; only start without one."""
    if increment is None or increment == 0:
        return (start,)
    steps = []
    i = 0
    while start + i * increment <= 1.0 + 1e-6:
        steps.append(round(start + i * increment, 6))
        i += 1
    return tuple(steps) or (start,)


# --- the command ----------------------------------------------------------------------------------


@audio_command("transcribe")
def transcribe(
    model: ModelOpt = "auto",
    language: LanguageOpt = None,
    task: Annotated[Task, typer.Option("--task", help="transcribe, or translate the speech into English.", rich_help_panel=DECODING)] = Task(DEFAULTS.task),
    beam_size: Annotated[
        Optional[int],
        typer.Option(
            "--beam-size",
            help=f"Beams of the model's search: Whisper's at temperature 0 (1..{MAX_BEAMS}; default {DECODING_DEFAULTS.beam_size}), CTC prefix or RNN-T beam search (1..{MAX_BEAM_SIZE}; default 1); 1 is greedy.",
            show_default=False,
            rich_help_panel=DECODING,
        ),
    ] = None,
    decoder: Annotated[
        Optional[str],
        typer.Option("--decoder", metavar="HEAD", help="The head a hybrid RNNT+CTC model decodes with: rnnt (its transducer, the default) or ctc.", show_default=False, rich_help_panel=TRANSDUCER),
    ] = None,
    max_symbols_per_step: Annotated[
        Optional[int],
        typer.Option("--max-symbols-per-step", metavar="N", help="Transducers: at most N labels on one frame before it moves on; default: the model's.", rich_help_panel=TRANSDUCER),
    ] = None,
    decoding_option: Annotated[
        Optional[list[str]],
        typer.Option(
            "--decoding-option",
            metavar="KEY=VALUE",
            help="An option of the model's decoding family by its name (any installed family's, plugins' too); repeatable.",
            show_default=False,
            rich_help_panel=DECODING,
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="Seed of the samples drawn above temperature 0: the same seed gives the same text.", rich_help_panel=WHISPER)] = DECODING_DEFAULTS.seed,
    best_of: Annotated[int, typer.Option("--best-of", help=f"Candidates sampled at each temperature above 0 (1..{MAX_BEST_OF}).", rich_help_panel=WHISPER)] = DECODING_DEFAULTS.best_of,
    patience: Annotated[float, typer.Option("--patience", help=f"Beam search stops after beam-size x patience finished candidates (above 0, at most {MAX_PATIENCE:g}).", rich_help_panel=WHISPER)] = DECODING_DEFAULTS.patience,
    length_penalty: number_or_none("--length-penalty", metavar="ALPHA", help="Rank candidates with Google's length penalty alpha (0..1); unset: sum logprob / length.", panel=WHISPER) = DECODING_DEFAULTS.length_penalty,
    temperature: Annotated[float, typer.Option("--temperature", help=f"The first sampling temperature, 0..{MAX_TEMPERATURE:g} (0: beam search or greedy).", rich_help_panel=WHISPER)] = DECODING_DEFAULTS.temperatures[0],
    temperature_increment_on_fallback: number_or_none(
        "--temperature-increment-on-fallback",
        metavar="STEP",
        help=f"Raise the temperature by STEP (0..1; up to 1.0, at most {MAX_TEMPERATURES} temperatures) while a window fails the thresholds below; 0 or none: no fallback.",
        panel=WHISPER,
    ) = round(DECODING_DEFAULTS.temperatures[1] - DECODING_DEFAULTS.temperatures[0], 6) if len(DECODING_DEFAULTS.temperatures) > 1 else None,
    compression_ratio_threshold: number_or_none("--compression-ratio-threshold", metavar="RATIO", help=f"A window whose gzip ratio is above RATIO (above 0, at most {MAX_COMPRESSION_RATIO:g}) failed (repetitive); none: no check.", panel=WHISPER) = DECODING_DEFAULTS.compression_ratio_threshold,
    logprob_threshold: number_or_none("--logprob-threshold", metavar="LOGPROB", help=f"A window whose average token logprob is below LOGPROB ({MIN_LOGPROB:g}..0) failed; none: no check.", panel=WHISPER) = DECODING_DEFAULTS.logprob_threshold,
    no_speech_threshold: number_or_none("--no-speech-threshold", metavar="PROB", help="A window whose no-speech probability is above PROB (0..1, and logprob low) is silence; none: no check.", panel=WHISPER) = DECODING_DEFAULTS.no_speech_threshold,
    condition_on_previous_text: Annotated[
        bool,
        typer.Option("--condition-on-previous-text/--no-condition-on-previous-text", help="Prompt each window with the text before it.", rich_help_panel=WHISPER),
    ] = DECODING_DEFAULTS.condition_on_previous_text,
    initial_prompt: Annotated[
        Optional[str], typer.Option("--initial-prompt", metavar="TEXT", help="Text to prompt the first window with (names, spelling, style).", rich_help_panel=WHISPER)
    ] = DECODING_DEFAULTS.initial_prompt,
    hotwords: Annotated[
        Optional[str],
        typer.Option("--hotwords", metavar="TEXT", help="Words to prompt every window with, before the previous text (faster-whisper's --hotwords): names, jargon. Example: --hotwords 'Kubernetes, Nvidia'.", rich_help_panel=WHISPER),
    ] = DECODING_DEFAULTS.hotwords,
    prompt: Annotated[
        Optional[str],
        typer.Option("--prompt", metavar="TEXT", help="Speech LLMs (Qwen2-Audio): your instruction about the audio in place of the transcription prompt; the answer is printed as text.", rich_help_panel=SPEECH_LLM),
    ] = None,
    suppress_tokens: Annotated[
        str,
        typer.Option("--suppress-tokens", metavar="IDS", help="Comma-separated token ids never emitted (each below the model's vocabulary size); -1: the non-speech symbols; '': none.", rich_help_panel=WHISPER),
    ] = ",".join(str(t) for t in DECODING_DEFAULTS.suppress_tokens),
    suppress_blank: Annotated[
        bool, typer.Option("--suppress-blank/--no-suppress-blank", help="No blank or end-of-text at the start of a window.", rich_help_panel=WHISPER)
    ] = DECODING_DEFAULTS.suppress_blank,
    vad: Annotated[Optional[Vad], typer.Option("--vad", help="Skip non-speech before decoding (segments stay inside the speech regions).", rich_help_panel=VAD)] = None,
    vad_threshold: Annotated[
        Optional[float],
        typer.Option("--vad-threshold", metavar="PROB", help=f"--vad silero: speech from this probability on (0..1; default {VadOptions().threshold:g}). faster-whisper's vad_parameters threshold.", show_default=False, rich_help_panel=VAD),
    ] = None,
    min_silence_duration_ms: Annotated[
        Optional[int],
        typer.Option("--min-silence-duration-ms", metavar="MS", help=f"--vad silero: a silence this long ends speech (default {DECODING_VAD.min_silence_s * 1000:g}).", show_default=False, rich_help_panel=VAD),
    ] = None,
    speech_pad_ms: Annotated[
        Optional[int],
        typer.Option("--speech-pad-ms", metavar="MS", help=f"--vad silero: audio kept on each side of speech (default {DECODING_VAD.speech_pad_s * 1000:g}). Example: --vad silero --vad-threshold 0.4 --speech-pad-ms 200.", show_default=False, rich_help_panel=VAD),
    ] = None,
    batch_size: Annotated[
        int,
        typer.Option("--batch-size", metavar="N", help=f"Whisper: above 1, Silero VAD windows of at most 30 s decoded N at a time, not conditioned on previous text (faster-whisper's batched pipeline); encoder-only models: chunks per forward pass (1..{MAX_TRANSCRIBE_BATCH}).", rich_help_panel=DECODING),
    ] = DEFAULTS.batch_size,
    diarize: Annotated[
        bool,
        typer.Option("--diarize", help="Label every segment with its speaker (oasr diarize), split where the speaker changes; shown in txt, srt, vtt and json.", rich_help_panel=OUTPUT),
    ] = DEFAULTS.diarize,
    num_speakers: NumSpeakersOpt = None,
    min_speakers: MinSpeakersOpt = 1,
    max_speakers: MaxSpeakersOpt = None,
    speaker_names: SpeakerNamesOpt = None,
    without_timestamps: Annotated[
        bool, typer.Option("--without-timestamps", help="Decode text only; segments then span whole 30 s windows.", rich_help_panel=WHISPER)
    ] = DECODING_DEFAULTS.without_timestamps,
    max_initial_timestamp: Annotated[
        float, typer.Option("--max-initial-timestamp", metavar="SECONDS", help=f"The first timestamp of a window may not start later (0..{WINDOW_SECONDS:g}; 0: no limit).", rich_help_panel=WHISPER)
    ] = DECODING_DEFAULTS.max_initial_timestamp,
    word_timestamps: Annotated[
        bool, typer.Option("--word-timestamps", help="Per-word times from cross-attention alignment (DTW).", rich_help_panel=TIMESTAMPS)
    ] = DEFAULTS.word_timestamps,
    prepend_punctuations: Annotated[
        str,
        typer.Option(
            "--prepend-punctuations",
            metavar="CHARS",
            help="With --word-timestamps: marks joined to the next word. Default: openai-whisper's opening quotes and brackets.",
            show_default=False,  # non-ASCII characters: kept out of the man page
            rich_help_panel=WHISPER,
        ),
    ] = DECODING_DEFAULTS.prepend_punctuations,
    append_punctuations: Annotated[
        str,
        typer.Option(
            "--append-punctuations",
            metavar="CHARS",
            help="With --word-timestamps: marks joined to the previous word. Default: openai-whisper's closing quotes, brackets and sentence marks (CJK ones too).",
            show_default=False,
            rich_help_panel=WHISPER,
        ),
    ] = DECODING_DEFAULTS.append_punctuations,
    hallucination_silence_threshold: Annotated[
        Optional[float],
        typer.Option("--hallucination-silence-threshold", metavar="SECONDS", help=f"With --word-timestamps: skip a suspect segment surrounded by this much silence (above 0, at most {WINDOW_SECONDS:g}).", rich_help_panel=WHISPER),
    ] = DECODING_DEFAULTS.hallucination_silence_threshold,
    output_format: format_option("transcript", f"{', '.join(list(OutputFormat.__members__)[:-1])} or all; repeatable. Default: from -o's extension, else txt.", "all", repeatable=True) = None,
    max_line_width: Annotated[
        Optional[int], typer.Option("--max-line-width", metavar="CHARS", help=f"srt/vtt: at most CHARS characters per line (1..{MAX_LINE_WIDTH}); cue times from word times (turns --word-timestamps on).", rich_help_panel=OUTPUT)
    ] = None,
    max_line_count: Annotated[
        Optional[int], typer.Option("--max-line-count", metavar="LINES", help=f"srt/vtt: at most LINES lines per cue (1..{MAX_LINE_COUNT}; needs --max-line-width).", rich_help_panel=OUTPUT)
    ] = None,
    highlight_words: Annotated[
        bool, typer.Option("--highlight-words", help="srt/vtt: a cue per word, the spoken word underlined (needs --word-timestamps).", rich_help_panel=OUTPUT)
    ] = False,
    max_words_per_line: Annotated[
        Optional[int], typer.Option("--max-words-per-line", metavar="N", help="srt/vtt: at most N words per cue, segments kept apart (no effect with --max-line-width).", rich_help_panel=OUTPUT)
    ] = None,
    *,
    flags: InputFlags,
) -> None:
    """Transcribe (or translate) speech: text, subtitles or JSON, with Whisper or any installed speech model.

    Plain text goes to stdout unless -o FILE or --output-dir DIR is given; '-' reads the audio from stdin.

    Several inputs run as a batch with the model loaded once: a file that fails is reported on one line and the batch goes on, then exits 1 (--fail-fast stops at the first failure).
    """
    from oasr.formats import WriterOptions, writers
    from oasr.formats.text import transcript_json

    plan = plan_outputs(flags, flag_values(output_format), {n: w.extension for n, w in writers().items()}, default="txt")
    _check_writer_flags(plan.formats, max_line_width, max_line_count, highlight_words, word_timestamps, max_words_per_line)
    word_timestamps = _words_for_layout(word_timestamps, max_line_width, max_line_count, max_words_per_line)
    writer_options = checked(WriterOptions, max_line_width, max_line_count, highlight_words, max_words_per_line)
    decoding = _decoding_values(
        locals(),
        temperatures=_temperatures(temperature, temperature_increment_on_fallback),
        suppress_tokens=_token_list(suppress_tokens),
        decoder=decoder,
        max_symbols_per_step=max_symbols_per_step,
        prompt=prompt,
        extra=decoding_option or [],
    )
    options = from_flags(
        TranscribeOptions,
        locals(),
        language=None if language is None or language.strip().lower() in ("", "auto") else language_code(language),
        vad_options=_vad_options(vad_threshold, min_silence_duration_ms, speech_pad_ms),
        decoding=decoding or None,
        diarization=diarization_options(num_speakers, min_speakers, max_speakers, speaker_names),
    )

    job = InputJob(
        task="transcribe",
        models=((model, "transcribe"),),
        options=options,
        writer_options=writer_options,
        json_line=lambda transcript: transcript_json(transcript, indent=None),
        describe=_describe,
    )
    run_inputs(flags, plan, job)


# --- flag checks (usage errors, exit 2) -------------------------------------------------------------


def _temperatures(start: float, increment: float | None) -> tuple[float, ...]:
    """The schedule, its length checked before it is built (a step of 1e-9 would be a billion
    temperatures); the temperatures themselves are checked by WhisperDecoding."""
    hint = "'--temperature-increment-on-fallback'"
    if increment is not None and not (math.isfinite(increment) and 0 <= increment <= 1):
        raise usage(f"must be positive and at most 1 (or 0 / none: no fallback), not {increment:g}", hint)
    if increment and math.isfinite(start) and start <= 1.0:
        count = math.floor((1.0 - start + 1e-6) / increment) + 1
        if count > MAX_TEMPERATURES:
            smallest = (1.0 - start) / (MAX_TEMPERATURES - 1)
            raise usage(
                f"a step of {increment:g} from {start:g} to 1.0 makes {count} temperatures; at most {MAX_TEMPERATURES} "
                f"(a step of at least {smallest:.3g})",
                hint,
            )
    return temperature_schedule(start, increment)


def _decoding_values(flags: dict, *, extra: list[str], **given) -> dict:
    """The decoding flags set away from their defaults, by option name, and each --decoding-option
    KEY=VALUE: the model's family reads them once it is loaded (a name it does not take is refused
    then, naming the flag), and no two families' flags go together (a usage error now)."""
    values = {f.name: flags[f.name] for f in dataclasses.fields(WhisperDecoding) if f.name in flags and f.name != "beam_size"}
    values.update(given)  # beam_size is shared: TranscribeOptions.beam_size
    values = {k: v for k, v in values.items() if (v != _WHISPER_DEFAULTS[k] if k in _WHISPER_DEFAULTS else v is not None)}
    for item in extra:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise usage(f"{item!r} is not KEY=VALUE", "'--decoding-option'")
        values[key.strip().replace("-", "_")] = value
    return values


_WHISPER_DEFAULTS = {f.name: getattr(DECODING_DEFAULTS, f.name) for f in dataclasses.fields(WhisperDecoding)}


def _check_writer_flags(formats: list[str], width, count, highlight: bool, word_timestamps: bool, words=None) -> None:
    """What WriterOptions cannot know: the formats the subtitle flags apply to."""
    from oasr.formats import SUBTITLE_FORMATS

    for flag, value in (("--max-line-width", width), ("--max-line-count", count), ("--highlight-words", highlight), ("--max-words-per-line", words)):
        if value and not any(f in SUBTITLE_FORMATS for f in formats):
            raise usage(f"{flag} applies to srt and vtt output; add -F srt or -F vtt (or -o FILE.srt)")
    if highlight and not word_timestamps:
        raise usage("--highlight-words needs --word-timestamps")


def _words_for_layout(word_timestamps: bool, width, count, words) -> bool:
    """The subtitle layout flags cut cues at word times (openai-whisper requires
    --word_timestamps for them): turned on here, saying so, rather than times made up per character."""
    asked = [flag for flag, value in (("--max-line-width", width), ("--max-line-count", count), ("--max-words-per-line", words)) if value]
    if asked and not word_timestamps:
        log.warning("%s: turning on --word-timestamps (cues are cut at word times)", ", ".join(asked))
        return True
    return word_timestamps


def _vad_options(threshold: float | None, silence_ms: int | None, pad_ms: int | None) -> VadOptions | None:
    """faster-whisper's VAD parameters by name, over the decoding defaults; None when none is given."""
    if threshold is None and silence_ms is None and pad_ms is None:
        return None
    fields = {"threshold": threshold, "min_silence_s": None if silence_ms is None else silence_ms / 1000, "speech_pad_s": None if pad_ms is None else pad_ms / 1000}
    return checked(dataclasses.replace, DECODING_VAD, **{k: v for k, v in fields.items() if v is not None})


def _describe(transcript) -> str:
    detected = "" if transcript.language_probability is None else f" (detected, p={transcript.language_probability:.2f})"
    return f"language {transcript.language}{detected}, {len(transcript.segments)} segment(s)"
