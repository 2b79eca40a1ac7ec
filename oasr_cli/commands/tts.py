"""oasr tts [TEXT] [-f FILE|-] [-m VOICE] [-o OUT.wav|-] [--output-dir DIR] ...

Policy only: where the text comes from, where the audio goes (checked before anything is
synthesized), flags -> SynthesizeOptions. Synthesis is ``oasr.pipelines.tts`` (``prepare``, then
its chunks written one sentence at a time, so ``-o -`` and ``--raw`` stream); the WAV and raw
writers are ``oasr.formats.wav``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from oasr.errors import InputError
from oasr.options import TTS_MAX_NOISE, TTS_MAX_SILENCE, TTS_MAX_SPEED, TTS_MIN_SPEED, SynthesizeOptions

from .. import kernel_caches
from ..inputs import check_output_path
from ..options import DeviceOpt, Device, ModelOpt, Report, format_option, from_flags, reporting, usage
from ..output import print_json

log = logging.getLogger("oasr")

DEFAULTS = SynthesizeOptions()
VOICE = "Voice"
OUTPUT = "Output"
MAX_TEXT_BYTES = 64 << 20  # a book is a few MB; more is not text meant to be read aloud
# oneDNN's kernel caches (oasr_cli.kernel_caches) below every other command's 64: a sentence's
# repeats (the text encoder's and the flow's layers) come within a few kernels of each other, and
# 16 held the 8 sentences of the joe voice at 410-420 MB against 465 (60 sentences: 500-515 MB
# against 570, for 7% more time re-compiling).
KERNEL_CACHE = 16

EXAMPLES = """Examples:

Say a sentence into hello.wav (the default voice, piper-en-us-joe-medium):
  oasr tts "Hello there, how are you today?" -o hello.wav

Read a file aloud, streamed straight to the sound card:
  oasr tts -f chapter.txt --raw | aplay -r 22050 -f S16_LE -t raw -

A little slower, with half a second between sentences:
  oasr tts -f notes.txt --speed 0.9 --sentence-silence 0.5 -o notes.wav

One WAV per line of prompts.txt, into clips/ (0001.wav, 0002.wav, ...):
  oasr tts -f prompts.txt --output-dir clips
"""


@reporting
def tts(
    text: Annotated[Optional[str], typer.Argument(help="The text to say. Without it, -f FILE, or the text on stdin.", show_default=False)] = None,
    file: Annotated[Optional[str], typer.Option("--file", "-f", help="Read the text from FILE ('-' is stdin).", metavar="FILE", show_default=False)] = None,
    model: ModelOpt = "auto",
    output: Annotated[
        Optional[str],
        typer.Option("--output", "-o", help="Write the audio to FILE ('-' is stdout). Default: stdout when it is not a terminal.", metavar="FILE", rich_help_panel=OUTPUT),
    ] = None,
    output_dir: Annotated[
        Optional[Path],
        typer.Option("--output-dir", help="One WAV per non-empty input line into DIR (0001.wav, ...), created if missing.", metavar="DIR", rich_help_panel=OUTPUT),
    ] = None,
    raw: Annotated[bool, typer.Option("--raw", help="Headerless 16-bit little-endian PCM at the voice's rate (for aplay), to stdout unless -o (as -F raw).", rich_help_panel=OUTPUT)] = False,
    output_format: format_option("speech", "wav (with a RIFF INFO chunk) or raw (as --raw). Default: wav, raw with --raw.") = None,
    speaker: Annotated[Optional[str], typer.Option("--speaker", help="Multi-speaker voices: a speaker id or name.", metavar="N|NAME", rich_help_panel=VOICE)] = None,
    speed: Annotated[float, typer.Option("--speed", metavar="F", help=f"Speaking rate ({TTS_MIN_SPEED:g}..{TTS_MAX_SPEED:g}); 2 is twice as fast.", rich_help_panel=VOICE)] = DEFAULTS.speed,
    noise_scale: Annotated[Optional[float], typer.Option("--noise-scale", metavar="F", help=f"Variation of the voice (0..{TTS_MAX_NOISE:g}). Default: the voice's.", rich_help_panel=VOICE)] = None,
    noise_w: Annotated[Optional[float], typer.Option("--noise-w", metavar="F", help=f"Variation of phoneme durations (0..{TTS_MAX_NOISE:g}). Default: the voice's.", rich_help_panel=VOICE)] = None,
    sentence_silence: Annotated[float, typer.Option("--sentence-silence", metavar="S", help=f"Seconds of silence after each sentence (0..{TTS_MAX_SILENCE:g}).", rich_help_panel=VOICE)] = DEFAULTS.sentence_silence,
    phonemes: Annotated[bool, typer.Option("--phonemes", help="The text is phonemes already (Piper's IPA symbols), one sentence per line.", rich_help_panel=VOICE)] = False,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="Seed of the noise: the same seed gives the same audio.", rich_help_panel=VOICE)] = DEFAULTS.seed,
    device: DeviceOpt = Device.cpu,
    *,
    report: Report,
) -> None:
    """Speak text with a Piper (VITS) voice: a WAV file, WAV or raw PCM on stdout, or one WAV per line.

    Long text is split into sentences and spoken in order; each sentence's audio is written as soon as it is made, so '-o -' and --raw stream. Characters the voice cannot say (emoji, another script) are skipped with one warning. Every WAV carries a RIFF INFO chunk naming oasr and the voice.

    Phonemizing text needs espeak-ng through piper-tts, the optional 'tts' extra (GPL-3); --phonemes input does not.
    """
    if text is not None and file is not None:
        raise usage("give the text as an argument or with -f, not both")
    if output is not None and output_dir is not None:
        raise usage("give -o or --output-dir, not both")
    if raw and output_format is not None and output_format.value != "raw":
        raise usage(f"--raw writes raw PCM, not {output_format.value}: drop one of them")
    fmt = output_format.value if output_format is not None else "raw" if raw else "wav"
    raw = fmt == "raw"
    if output_dir is not None and raw:
        raise usage("--raw writes one stream; --output-dir writes WAV files")
    options = from_flags(SynthesizeOptions, locals(), speaker=_speaker(speaker))
    to_stdout = output == "-" or (output is None and output_dir is None)
    if to_stdout and report.json_out:
        raise usage("--json prints on stdout, where the audio would go: give -o FILE or --output-dir")
    if to_stdout and output is None and not raw and sys.stdout.isatty():
        raise usage("the audio would go to a terminal: give -o FILE.wav ('-o -' forces stdout) or --raw")
    # Before any text is read or synthesized: an output that cannot be written fails now.
    if output is not None and output != "-":
        check_output_path(Path(output))
    if output_dir is not None:
        check_output_path(output_dir / f"0001.{_extension(fmt)}")
    source = _read_text(text, file)

    kernel_caches.cap(KERNEL_CACHE)  # read at oneDNN's first use
    from oasr.pipelines.tts import prepare

    run = dict(model=model, options=options, device=device.value, dtype="float32")
    if output_dir is not None:
        _per_line(source, output_dir, run, report, fmt)
        return
    plan = prepare(source, **run)
    result = _write(plan, None if to_stdout else Path(output), fmt)
    if report.json_out:
        print_json({"output": output, **result})


def _speaker(value: str | None):
    if value is None:
        return None
    return int(value) if value.strip().isdigit() else value


def _read_text(text: str | None, file: str | None) -> str:
    if text is not None:
        return text
    if file is None and sys.stdin.isatty():
        raise usage("no text: give it as an argument, with -f FILE, or on stdin")
    if file is None or file == "-":
        data = sys.stdin.buffer.read(MAX_TEXT_BYTES + 1)
        where = "stdin"
    else:
        try:
            with open(file, "rb") as f:
                data = f.read(MAX_TEXT_BYTES + 1)
        except OSError as e:
            raise InputError(f"{file}: {e.strerror or e}") from None
        where = file
    if len(data) > MAX_TEXT_BYTES:
        raise InputError(f"{where}: more than {MAX_TEXT_BYTES >> 20} MB of text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"{where}: not UTF-8 text (byte {e.start})") from None


def _extension(fmt: str) -> str:
    from oasr.formats.registry import get

    return get("speech", fmt).extension


def _write(plan, path: Path | None, fmt: str) -> dict:
    """Every chunk of ``plan`` written as it comes, in format ``fmt``: into ``path`` atomically, or to stdout."""
    from oasr.formats.registry import get
    from oasr.formats.wav import atomic_stream

    sentences = []
    open_writer = get("speech", fmt).write

    def pour(out) -> None:
        writer = open_writer(out, plan.sample_rate, plan.wav_tags)
        for chunk in plan.chunks():
            writer.write(chunk.samples)
            sentences.append(chunk.sentence)
        writer.finish()

    if path is None:
        pour(sys.stdout.buffer)
    else:
        if path.parent != Path("") and not path.parent.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_stream(path) as out:
            pour(out)
        log.info("wrote %s", path)
    duration = sentences[-1].end if sentences else 0.0
    return {
        "sample_rate": plan.sample_rate,
        "duration": duration,
        "sentences": [s.__dict__ for s in sentences],
        "provenance": plan.provenance.__dict__,
    }


def _per_line(source: str, folder: Path, run: dict, report: Report, fmt: str) -> None:
    from oasr.errors import OasrError
    from oasr.pipelines.tts import prepare

    lines = [line for line in source.splitlines() if line.strip()]
    if not lines:
        raise InputError("the text is empty: nothing to say")
    folder.mkdir(parents=True, exist_ok=True)
    width = max(4, len(str(len(lines))))
    written, failed = [], []
    for i, line in enumerate(lines, 1):
        path = folder / f"{i:0{width}d}.{_extension(fmt)}"
        try:
            written.append({"line": i, "output": str(path), **_write(prepare(line, **run), path, fmt)})
        except OasrError as e:
            log.error("line %d: %s", i, e)
            failed.append(i)
    if report.json_out:
        print_json({"outputs": written, "failed": failed})
    if failed:
        raise InputError(f"{len(failed)} of {len(lines)} line(s) failed: {', '.join(map(str, failed[:10]))}")
