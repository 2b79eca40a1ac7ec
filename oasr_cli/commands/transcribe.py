"""oasr transcribe -m MODEL -f AUDIO [-f AUDIO ...]

Policy only: flags -> TranscribeOptions, where each transcript goes (stdout, -o FILE, --output-dir),
batch behaviour (go on past a bad file, summarise, exit 1) and the progress bar. Decoding is
``oasr.transcribe``; audio decoding ``oasr.io.audio``; the file formats ``oasr.formats``.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from oasr.errors import InputError, OasrError
from oasr.formats import FORMATS
from oasr.options import TASKS, VAD_KINDS, TranscribeOptions

from ..batch import DASH, Batch, file_progress, usage
from ..options import (
    AudioFilesOpt,
    Device,
    DeviceOpt,
    Dtype,
    DtypeOpt,
    FailFastOpt,
    JsonOpt,
    LanguageOpt,
    ModelOpt,
    OutputDirOpt,
    OutputOpt,
    QuietOpt,
    VerboseOpt,
)
from ..output import setup_logging, use_color

log = logging.getLogger("oasr")

DEFAULTS = TranscribeOptions()
OutputFormat = Enum("OutputFormat", {name: name for name in (*FORMATS, "all")}, type=str)
Task = Enum("Task", {name: name for name in TASKS}, type=str)
Vad = Enum("Vad", {name: name for name in VAD_KINDS}, type=str)

DECODING = "Decoding"
TIMESTAMPS = "Timestamps"
OUTPUT = "Output"


# --- flag parsers ---------------------------------------------------------------------------------


def _optional_float(text: Any) -> float | None:
    """A number, or none/off to switch the check off."""
    if text is None or isinstance(text, (int, float)):  # a default, already parsed
        return text
    if text.strip().lower() in ("none", "off"):
        return None
    try:
        return float(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a number (or 'none' to switch it off)") from None


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


def transcribe(
    audio: Annotated[
        Optional[list[str]],
        typer.Argument(help="More audio files, after those given with -f.", metavar="AUDIO", show_default=False),
    ] = None,
    files: AudioFilesOpt = None,
    model: ModelOpt = "auto",
    language: LanguageOpt = None,
    task: Annotated[Task, typer.Option("--task", help="transcribe, or translate the speech into English.", rich_help_panel=DECODING)] = Task(DEFAULTS.task),
    beam_size: Annotated[int, typer.Option("--beam-size", help="Beams at temperature 0; 1 is greedy.", rich_help_panel=DECODING)] = DEFAULTS.beam_size,
    best_of: Annotated[int, typer.Option("--best-of", help="Candidates sampled at each temperature above 0.", rich_help_panel=DECODING)] = DEFAULTS.best_of,
    patience: Annotated[float, typer.Option("--patience", help="Beam search stops after beam-size x patience finished candidates.", rich_help_panel=DECODING)] = DEFAULTS.patience,
    length_penalty: Annotated[
        Optional[float],
        typer.Option("--length-penalty", parser=_optional_float, metavar="ALPHA", help="Rank candidates with Google's length penalty alpha (0..1); unset: sum logprob / length.", rich_help_panel=DECODING),
    ] = DEFAULTS.length_penalty,
    temperature: Annotated[float, typer.Option("--temperature", help="The first sampling temperature (0: beam search or greedy).", rich_help_panel=DECODING)] = DEFAULTS.temperatures[0],
    temperature_increment_on_fallback: Annotated[
        Optional[float],
        typer.Option(
            "--temperature-increment-on-fallback",
            parser=_optional_float,
            metavar="STEP",
            help="Raise the temperature by STEP (up to 1.0) while a window fails the thresholds below; 0 or none: no fallback.",
            rich_help_panel=DECODING,
        ),
    ] = round(DEFAULTS.temperatures[1] - DEFAULTS.temperatures[0], 6) if len(DEFAULTS.temperatures) > 1 else None,
    compression_ratio_threshold: Annotated[
        Optional[float],
        typer.Option("--compression-ratio-threshold", parser=_optional_float, metavar="RATIO", help="A window whose gzip ratio is above RATIO failed (repetitive); none: no check.", rich_help_panel=DECODING),
    ] = DEFAULTS.compression_ratio_threshold,
    logprob_threshold: Annotated[
        Optional[float],
        typer.Option("--logprob-threshold", parser=_optional_float, metavar="LOGPROB", help="A window whose average token logprob is below LOGPROB failed; none: no check.", rich_help_panel=DECODING),
    ] = DEFAULTS.logprob_threshold,
    no_speech_threshold: Annotated[
        Optional[float],
        typer.Option("--no-speech-threshold", parser=_optional_float, metavar="PROB", help="A window whose no-speech probability is above PROB (and logprob low) is silence; none: no check.", rich_help_panel=DECODING),
    ] = DEFAULTS.no_speech_threshold,
    condition_on_previous_text: Annotated[
        bool,
        typer.Option("--condition-on-previous-text/--no-condition-on-previous-text", help="Prompt each window with the text before it.", rich_help_panel=DECODING),
    ] = DEFAULTS.condition_on_previous_text,
    initial_prompt: Annotated[
        Optional[str], typer.Option("--initial-prompt", metavar="TEXT", help="Text to prompt the first window with (names, spelling, style).", rich_help_panel=DECODING)
    ] = DEFAULTS.initial_prompt,
    suppress_tokens: Annotated[
        str,
        typer.Option("--suppress-tokens", metavar="IDS", help="Comma-separated token ids never emitted; -1: the non-speech symbols; '': none.", rich_help_panel=DECODING),
    ] = ",".join(str(t) for t in DEFAULTS.suppress_tokens),
    suppress_blank: Annotated[
        bool, typer.Option("--suppress-blank/--no-suppress-blank", help="No blank or end-of-text at the start of a window.", rich_help_panel=DECODING)
    ] = DEFAULTS.suppress_blank,
    vad: Annotated[Optional[Vad], typer.Option("--vad", help="Skip non-speech before decoding.", rich_help_panel=DECODING)] = None,
    diarize: Annotated[
        bool,
        typer.Option("--diarize", help="Label every segment with its speaker (oasr diarize), split where the speaker changes; shown in txt, srt, vtt and json.", rich_help_panel=OUTPUT),
    ] = DEFAULTS.diarize,
    without_timestamps: Annotated[
        bool, typer.Option("--without-timestamps", help="Decode text only; segments then span whole 30 s windows.", rich_help_panel=TIMESTAMPS)
    ] = DEFAULTS.without_timestamps,
    max_initial_timestamp: Annotated[
        float, typer.Option("--max-initial-timestamp", metavar="SECONDS", help="The first timestamp of a window may not start later.", rich_help_panel=TIMESTAMPS)
    ] = DEFAULTS.max_initial_timestamp,
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
            rich_help_panel=TIMESTAMPS,
        ),
    ] = DEFAULTS.prepend_punctuations,
    append_punctuations: Annotated[
        str,
        typer.Option(
            "--append-punctuations",
            metavar="CHARS",
            help="With --word-timestamps: marks joined to the previous word. Default: openai-whisper's closing quotes, brackets and sentence marks (CJK ones too).",
            show_default=False,
            rich_help_panel=TIMESTAMPS,
        ),
    ] = DEFAULTS.append_punctuations,
    hallucination_silence_threshold: Annotated[
        Optional[float],
        typer.Option("--hallucination-silence-threshold", metavar="SECONDS", help="With --word-timestamps: skip a suspect segment surrounded by this much silence.", rich_help_panel=TIMESTAMPS),
    ] = DEFAULTS.hallucination_silence_threshold,
    output_format: Annotated[
        Optional[list[OutputFormat]],
        typer.Option("--output-format", "-F", help="txt, srt, vtt, json, tsv, lrc or all; repeatable. Default: from -o's extension, else txt.", rich_help_panel=OUTPUT, show_default=False),
    ] = None,
    output: OutputOpt = None,
    output_dir: OutputDirOpt = None,
    max_line_width: Annotated[
        Optional[int], typer.Option("--max-line-width", metavar="CHARS", help="srt/vtt: at most CHARS characters per line.", rich_help_panel=OUTPUT)
    ] = None,
    max_line_count: Annotated[
        Optional[int], typer.Option("--max-line-count", metavar="LINES", help="srt/vtt: at most LINES lines per cue (needs --max-line-width).", rich_help_panel=OUTPUT)
    ] = None,
    highlight_words: Annotated[
        bool, typer.Option("--highlight-words", help="srt/vtt: a cue per word, the spoken word underlined (needs --word-timestamps).", rich_help_panel=OUTPUT)
    ] = False,
    json_out: JsonOpt = False,
    device: DeviceOpt = Device.auto,
    dtype: DtypeOpt = Dtype.auto,
    fail_fast: FailFastOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Transcribe (or translate) speech with a Whisper model: text, subtitles or JSON.

    Plain text goes to stdout unless -o FILE or --output-dir DIR is given; '-' reads the audio from stdin.

    Several inputs run as a batch with the model loaded once: a file that fails is reported on one line and the batch goes on, then exits 1 (--fail-fast stops at the first failure).
    """
    sources = [*(files or []), *(audio or [])]
    formats, routes = _plan_outputs(sources, output_format, output, output_dir, json_out)
    _check_writer_flags(formats, max_line_width, max_line_count, highlight_words, word_timestamps)
    options = _options(
        task=task.value,
        language=None if language is None or language.strip().lower() in ("", "auto") else language.strip(),
        beam_size=beam_size,
        best_of=best_of,
        patience=patience,
        length_penalty=length_penalty,
        temperatures=_temperatures(temperature, temperature_increment_on_fallback),
        compression_ratio_threshold=compression_ratio_threshold,
        logprob_threshold=logprob_threshold,
        no_speech_threshold=no_speech_threshold,
        condition_on_previous_text=condition_on_previous_text,
        initial_prompt=initial_prompt,
        suppress_tokens=_token_list(suppress_tokens),
        suppress_blank=suppress_blank,
        without_timestamps=without_timestamps,
        max_initial_timestamp=max_initial_timestamp,
        word_timestamps=word_timestamps,
        prepend_punctuations=prepend_punctuations,
        append_punctuations=append_punctuations,
        hallucination_silence_threshold=hallucination_silence_threshold,
        vad=vad.value if vad is not None else None,
        diarize=diarize,
    )
    setup_logging(quiet, verbose)

    from oasr.formats import WriterOptions

    writer_options = WriterOptions(max_line_width, max_line_count, highlight_words)
    batch = _TranscribeBatch(sources, routes, writer_options, fail_fast, model, options, device.value, dtype.value)
    batch.run(show_progress=not quiet and use_color(sys.stderr))
    batch.exit_if_failed()


# --- flag checks (usage errors, exit 2) -------------------------------------------------------------


def _options(**fields: Any) -> TranscribeOptions:
    try:
        return TranscribeOptions(**fields)
    except InputError as e:  # a bad flag value, named in the message
        raise usage(str(e)) from e


def _temperatures(start: float, increment: float | None) -> tuple[float, ...]:
    if increment is not None and increment < 0:
        raise usage("must be positive (or 0 / none: no fallback)", "'--temperature-increment-on-fallback'")
    return temperature_schedule(start, increment)


def _check_writer_flags(formats: list[str], width, count, highlight: bool, word_timestamps: bool) -> None:
    from oasr.formats import SUBTITLE_FORMATS

    for flag, value in (("--max-line-width", width), ("--max-line-count", count), ("--highlight-words", highlight)):
        if value and not any(f in SUBTITLE_FORMATS for f in formats):
            raise usage(f"{flag} applies to srt and vtt output; add -F srt or -F vtt (or -o FILE.srt)")
    if width is not None and width < 1:
        raise usage("must be at least 1", "'--max-line-width'")
    if count is not None and count < 1:
        raise usage("must be at least 1", "'--max-line-count'")
    if count is not None and width is None:
        raise usage("--max-line-count needs --max-line-width (lines are cut at that width)")
    if highlight and not word_timestamps:
        raise usage("--highlight-words needs --word-timestamps")


def _expand(requested: list[Any] | None) -> list[str]:
    names: list[str] = []
    for f in requested or ():
        value = f.value if isinstance(f, Enum) else str(f)
        for name in FORMATS if value == "all" else (value,):
            if name not in names:
                names.append(name)
    return names


def _plan_outputs(sources, requested, output, output_dir, json_out) -> tuple[list[str], list[list[tuple[str, Path | None]]]]:
    """The formats, and for each source its (format, path or None for stdout) targets."""
    from oasr.formats import extension, format_from_suffix

    if not sources:
        raise usage("give at least one audio file (-f AUDIO, or -f - for stdin)")
    if sources.count(DASH) > 1:
        raise usage("stdin ('-') can be read only once")
    formats = _expand(requested)
    to_stdout = output is not None and str(output) == DASH
    out_file = output if output is not None and not to_stdout else None
    if out_file is not None and output_dir is not None:
        raise usage("give -o FILE (one input) or --output-dir DIR (a batch), not both")
    if json_out:
        if out_file is not None or output_dir is not None:
            raise usage("--json prints JSON on stdout; to write JSON files use -F json with -o or --output-dir")
        if formats and formats != ["json"]:
            raise usage("--json prints the JSON format; drop -F (or use -F json)")
        formats = ["json"]

    if output_dir is not None:
        formats = formats or ["txt"]
        if output_dir.exists() and not output_dir.is_dir():
            raise usage(f"{output_dir} exists and is not a directory", "'--output-dir'")
        seen: dict[Path, str] = {}
        routes = []
        for src in sources:
            stem = "stdin" if src == DASH else Path(src).stem
            targets = [(f, output_dir / f"{stem}.{extension(f)}") for f in formats]
            for _, path in targets:
                if path in seen:
                    raise usage(f"{seen[path]} and {src} would both write {path}; process them separately")
                seen[path] = src
            routes.append(targets)
        return formats, routes

    if out_file is not None:
        if len(sources) > 1:
            raise usage(f"-o {out_file} takes one input, not {len(sources)}; use --output-dir DIR for a batch")
        if out_file.is_dir():
            raise usage(f"{out_file} is a directory; use --output-dir {out_file}", "'-o' / '--output'")
        if not formats:
            guessed = format_from_suffix(out_file)
            if guessed is None:
                raise usage(f"cannot tell the format from {out_file.name!r}; add -F {'|'.join(FORMATS)}", "'-o' / '--output'")
            formats = [guessed]
        if len(formats) == 1:
            return formats, [[(formats[0], out_file)]]
        base = out_file.with_suffix("") if format_from_suffix(out_file) else out_file
        return formats, [[(f, base.parent / f"{base.name}.{extension(f)}") for f in formats]]

    formats = formats or ["txt"]
    if len(formats) > 1:
        raise usage("several output formats (-F all) need --output-dir DIR, or -o FILE for one input")
    return formats, [[(formats[0], None)] for _ in sources]


# --- the batch --------------------------------------------------------------------------------------


class _TranscribeBatch(Batch):
    """Transcribe each input with one model; several formats per input may be written."""

    def __init__(self, sources, routes, writer_options, fail_fast: bool, model: str, options: TranscribeOptions, device: str, dtype: str):
        super().__init__(sources, routes, fail_fast)
        self.writer_options = writer_options
        self.model_label, self.options, self.device, self.dtype = model, options, device, dtype

    def prepare(self) -> None:
        self._pipeline = _pipeline()
        self._model = _load_model(self.model_label, self.device, self.dtype)

    def process(self, src: str, route, progress) -> None:
        self._write(src, self._transcribe(src, progress), route)

    def _transcribe(self, src, progress):
        from oasr.io.audio import duration, load_audio

        started = time.perf_counter()
        samples = load_audio(src)
        seconds = duration(samples)
        with file_progress(progress, src, seconds) as callback:
            transcript = self._pipeline(samples, self._model, self.options, device=self.device, dtype=self.dtype, progress=callback)
        if not transcript.source:
            transcript = dataclasses.replace(transcript, source=src)
        if transcript.provenance is not None:  # loaded here: name the model as the user gave it
            transcript = dataclasses.replace(transcript, provenance=dataclasses.replace(transcript.provenance, model=self.model_label))
        detected = "" if transcript.language_probability is None else f" (detected, p={transcript.language_probability:.2f})"
        log.info(
            "%s: %.1f s of audio in %.1f s, language %s%s, %d segment(s)",
            src, seconds, time.perf_counter() - started, transcript.language, detected, len(transcript.segments),
        )
        return transcript

    def _write(self, src: str, transcript, route) -> None:
        from oasr.formats import render
        from oasr.formats.text import transcript_json
        from oasr.io.files import atomic_write_text

        for fmt, path in route:
            if path is not None:
                atomic_write_text(path, render(transcript, fmt, self.writer_options))
                log.info("wrote %s", path)
            elif fmt == "json":  # one object; several inputs: JSON Lines, one compact object per input
                self.emit(src, transcript_json(transcript, indent=None if len(self.sources) > 1 else 2) + "\n", header=False)
            else:
                self.emit(src, render(transcript, fmt, self.writer_options))


def _pipeline():
    import oasr

    try:
        return oasr.transcribe
    except AttributeError as e:
        raise OasrError("this build of oasr has no transcription pipeline (oasr.transcribe)") from e


def _load_model(spec: str, device: str, dtype: str):
    """The model, loaded once for the whole batch.

    ``oasr.load_pretrained`` takes what ``-m`` takes: a bundle, a checkpoint directory (converted in
    memory), or a registry name / ``auto`` (resolved into the oasr cache by ``oasr.hub.resolve``).
    """
    import oasr

    log.info("loading %s (device %s, dtype %s)", spec, device, dtype)
    return oasr.load_pretrained(spec, device=device, dtype=dtype)
