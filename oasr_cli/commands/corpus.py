"""oasr batch TASK MANIFEST -o OUTDIR [task options...]

Policy only. The task options are the single-file command's own flags, parsed by that command
(``oasr_cli.inputs.CAPTURE``: its body builds its options as always and hands them over instead of
running), so `oasr batch transcribe ... -l de -F srt` means what `oasr transcribe -l de -F srt`
means. The run is ``oasr.batch``; this module draws its progress and prints its summary.
"""

from __future__ import annotations

import sys
import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ..options import MAX_AUDIO_SECONDS, ArchitectureOpt, Device, DeviceOpt, Dtype, DtypeOpt, JsonOpt, ModelOpt, QuietOpt, VerboseOpt, from_flags, new_app, usage
from ..output import interactive, print_json, setup_logging

AUDIO_TASKS = ("transcribe", "diarize", "pitch")  # their options: the command's own flags
FOLDER_TASKS = ("convert", "quantize")
OWN_FLAG_TASKS = ("separate", "tts")  # several files per input, or text in: a few of the command's flags (below)
STATUS_SECONDS = 30.0  # off a terminal: one status line this often (cron-friendly)
PLACEHOLDER = "<manifest>"  # the one input the task command is shown; the real ones come from MANIFEST

EXAMPLES = """Examples:

Transcribe every WAV under a folder into subtitles, two worker processes:
  oasr batch transcribe ./podcasts --glob '**/*.wav' -o ./subs --workers 2 -m whisper-base -F srt

Diarize the meetings a CSV lists (path,num_speakers), on a Ray cluster, a GPU per actor:
  oasr batch diarize meetings.csv -o ./rttm --engine ray --ray-address auto --num-gpus 1

Run it again after a crash or with new files: what is up to date is skipped:
  oasr batch transcribe ./podcasts --glob '**/*.wav' -o ./subs --workers 2 -m whisper-base -F srt

Convert every checkpoint a training run left in ./ckpts into bundles:
  oasr batch convert ./ckpts -o ./bundles --dtype float16

Vocals and accompaniment of every song (OUTDIR/<song>/vocals.wav, no_vocals.wav):
  oasr batch separate ./songs --glob '**/*.mp3' -o ./stems --two-stems vocals

Speak every text file of a folder (OUTDIR/<name>.wav), a little slower:
  oasr batch tts ./chapters --glob '*.txt' -o ./audio --speed 0.9
"""


class Engine(str, Enum):
    local = "local"
    ray = "ray"


# The task options are not this command's: they are handed, as given, to the task's command.
CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": ["-h", "--help"]}


def batch(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(help=f"{', '.join(AUDIO_TASKS + OWN_FLAG_TASKS + FOLDER_TASKS)}.", metavar="TASK", show_default=False)],
    manifest: Annotated[
        Path,
        typer.Argument(help="A folder (see --glob), a text file of paths, or JSONL/CSV with a path column (per-row language, num_speakers).", metavar="MANIFEST", show_default=False),
    ],
    outdir: Annotated[Path, typer.Option("--output-dir", "-o", help="Where the outputs and batch.jsonl go.", metavar="OUTDIR", show_default=False)],
    glob: Annotated[Optional[str], typer.Option("--glob", help="Which files of a MANIFEST folder (default *; **/*.wav recurses).", metavar="PATTERN")] = None,
    engine: Annotated[Engine, typer.Option("--engine", help="local: worker processes on this machine; ray: actors on a Ray cluster (the ray extra).")] = Engine.local,
    workers: Annotated[Optional[int], typer.Option("--workers", help="Worker processes (local, default 1) or actors (ray, default one per CPU).", metavar="N")] = None,
    threads: Annotated[Optional[int], typer.Option("--threads", help="Torch threads per worker. Default: this machine's cores shared out (local), 1 (ray).", metavar="N")] = None,
    ray_address: Annotated[Optional[str], typer.Option("--ray-address", help="auto (a running cluster) or a cluster address; default: a local Ray instance.", metavar="ADDRESS")] = None,
    num_gpus: Annotated[float, typer.Option("--num-gpus", help="GPUs per Ray actor.", metavar="N")] = 0,
    per_call: Annotated[Optional[int], typer.Option("--inputs-per-call", help="Inputs a Ray actor takes per call. Default: by corpus size.", metavar="N")] = None,
    force: Annotated[bool, typer.Option("--force", help="Redo inputs whose outputs are up to date.")] = False,
    max_failures: Annotated[Optional[int], typer.Option("--max-failures", help="Stop after N failed inputs (default: go on).", metavar="N")] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Run a task over a whole corpus: resumable, on worker processes or a Ray cluster.

    Task options follow MANIFEST and are the task command's own (see oasr TASK --help; separate: -m, --two-stems, --stems, --format, --shifts, --overlap, --segment, --seed, --batch-size, --clip, --device, --dtype, into OUTDIR/<song>/<stem>.<format>; tts: -m, --speaker, --speed, --noise-scale, --noise-w, --sentence-silence, --phonemes, --seed, one WAV per UTF-8 text file; convert: --architecture, --dtype; quantize: --scheme, --keep). Outputs go where the task command's --output-dir would put them, mirroring the corpus's folders under OUTDIR, each written atomically; OUTDIR/batch.jsonl has one line per input (status, outputs, duration, timing, the models' provenance). Inputs whose outputs exist with the same model and options are skipped; a failing input is recorded and the batch goes on, then exits 1.
    """
    setup_logging(quiet, verbose)
    for name, value in (("--workers", workers), ("--threads", threads), ("--inputs-per-call", per_call), ("--max-failures", max_failures)):
        if value is not None and value < 1:
            raise usage(f"must be at least 1, not {value}", f"'{name}'")
    if num_gpus < 0:
        raise usage(f"must be 0 or more, not {num_gpus:g}", "'--num-gpus'")
    if task in AUDIO_TASKS:
        given = _audio_task_options(task, list(ctx.args), outdir)
        max_failures = 1 if given.pop("fail_fast") and max_failures is None else max_failures
    elif task in FOLDER_TASKS or task in OWN_FLAG_TASKS:
        given = _own_task_options(task, list(ctx.args))
    else:
        raise usage(f"{task!r} is not a task; choose {', '.join(AUDIO_TASKS + OWN_FLAG_TASKS + FOLDER_TASKS)}", "'TASK'")

    import oasr

    with _Progress(task, interactive(quiet), quiet) as progress:
        summary = oasr.batch(
            task, manifest, outdir, glob=glob, engine=engine.value, workers=workers, threads=threads,
            ray_address=ray_address, num_gpus=num_gpus, per_call=per_call, force=force,
            max_failures=max_failures, progress=progress.update, **given,
        )
    if json_out:
        print_json(summary.to_dict())
    if not quiet:
        typer.echo(_summary_line(summary), err=True)
    if summary.failed:
        raise typer.Exit(1)


# --- task options ----------------------------------------------------------------------------------


def _audio_task_options(task: str, args: list[str], outdir: Path) -> dict[str, Any]:
    """The task command's flags, parsed by the command itself, as oasr.batch's arguments."""
    import importlib

    from ..inputs import CAPTURE

    command = getattr(importlib.import_module(f"oasr_cli.commands.{task}"), task)
    app = new_app(f"oasr batch {task}")
    app.command()(command)
    captured: list = []
    token = CAPTURE.set(captured)
    try:
        typer.main.get_command(app).main(args=[*args, "--output-dir", str(outdir), "--file", PLACEHOLDER], prog_name=f"oasr batch {task} MANIFEST -o OUTDIR", standalone_mode=False)
    finally:
        CAPTURE.reset(token)
    ((flags, plan, job),) = captured
    if flags.sources != [PLACEHOLDER]:
        extra = " ".join(s for s in flags.sources if s != PLACEHOLDER)
        raise usage(f"the inputs come from MANIFEST; drop {extra} (task options go after MANIFEST)")
    if flags.output is not None or flags.json_out:
        raise usage("-o is OUTDIR and --json the batch summary; the task's own -o/--json do not apply")
    if job.plot is not None:
        raise usage(f"--plot draws one input; run oasr {task} --plot on it")
    if flags.max_audio_seconds != MAX_AUDIO_SECONDS:  # the workers' limit: they get the caller's OASR_ settings
        import os

        from oasr.io.audio import MAX_SECONDS_ENV

        os.environ[MAX_SECONDS_ENV] = repr(float(flags.max_audio_seconds))
    return {
        "models": job.models,
        "options": job.options,
        "writer_options": job.writer_options,
        "formats": tuple(plan.formats),
        "device": flags.device,
        "dtype": flags.dtype,
        "fail_fast": flags.fail_fast,
    }


def _convert_options(architecture: ArchitectureOpt = None, dtype: DtypeOpt = Dtype.auto):
    from oasr.corpus.tasks import ConvertTaskOptions

    return {"options": ConvertTaskOptions(architecture=architecture, dtype=dtype.value)}


def _quantize_options(
    scheme: Annotated[str, typer.Option("--scheme", help="int8 or int4.")] = "int8",
    keep: Annotated[Optional[list[str]], typer.Option("--keep", help="Keep weights matching this fnmatch pattern in floating point.", metavar="PATTERN")] = None,
):
    from oasr.corpus.tasks import QuantizeTaskOptions

    from .quantize import Scheme

    if scheme not in {s.value for s in Scheme}:
        raise usage(f"{scheme!r} is not a scheme; choose {', '.join(s.value for s in Scheme)}", "'--scheme'")
    return {"options": QuantizeTaskOptions(scheme=scheme, keep=tuple(keep or ()))}


def _separate_options(
    model: ModelOpt = "htdemucs",
    two_stems: Annotated[Optional[str], typer.Option("--two-stems", metavar="STEM", help="Write STEM and no_STEM (the sum of the others) only.")] = None,
    stems: Annotated[Optional[str], typer.Option("--stems", metavar="A,B", help="Write only these stems (comma-separated).")] = None,
    output_format: Annotated[str, typer.Option("--format", help="wav or flac (16-bit).")] = "wav",
    shifts: Annotated[int, typer.Option("--shifts", metavar="N", help="Random shifts averaged.")] = 1,
    overlap: Annotated[float, typer.Option("--overlap", metavar="F", help="Share of a window overlapping the next.")] = 0.25,
    segment: Annotated[Optional[float], typer.Option("--segment", metavar="S", help="Seconds per window (default: the model's).")] = None,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="Seed of the shifts.")] = 0,
    batch_size: Annotated[int, typer.Option("--batch-size", metavar="N", help="Windows per forward pass.")] = 1,
    clip: Annotated[str, typer.Option("--clip", help="rescale, clamp or none.")] = "rescale",
    device: DeviceOpt = Device.auto,
    dtype: DtypeOpt = Dtype.auto,
) -> dict[str, Any]:
    from oasr.formats.registry import names
    from oasr.options import SeparateOptions

    if output_format not in names("stems"):
        raise usage(f"{output_format!r} is not a stem format; choose {', '.join(names('stems'))}", "'--format'")
    wanted = tuple(s.strip() for s in stems.split(",")) if stems is not None else None
    options = from_flags(SeparateOptions, locals(), stems=wanted)
    return {"model": model, "options": options, "formats": (output_format,), "device": device.value, "dtype": dtype.value}


def _tts_options(
    model: ModelOpt = "auto",
    speaker: Annotated[Optional[str], typer.Option("--speaker", help="Multi-speaker voices: a speaker id or name.", metavar="N|NAME")] = None,
    speed: Annotated[float, typer.Option("--speed", metavar="F", help="Speaking rate; 2 is twice as fast.")] = 1.0,
    noise_scale: Annotated[Optional[float], typer.Option("--noise-scale", metavar="F", help="Variation of the voice. Default: the voice's.")] = None,
    noise_w: Annotated[Optional[float], typer.Option("--noise-w", metavar="F", help="Variation of phoneme durations. Default: the voice's.")] = None,
    sentence_silence: Annotated[float, typer.Option("--sentence-silence", metavar="S", help="Seconds of silence after each sentence.")] = 0.0,
    phonemes: Annotated[bool, typer.Option("--phonemes", help="The text files hold phonemes (Piper's IPA symbols), one sentence per line.")] = False,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="Seed of the noise.")] = 0,
    device: DeviceOpt = Device.cpu,
) -> dict[str, Any]:
    from oasr.options import SynthesizeOptions

    from .tts import _speaker

    options = from_flags(SynthesizeOptions, locals(), speaker=_speaker(speaker))
    return {"model": model, "options": options, "device": device.value, "dtype": "float32"}


# The tasks whose flags this module declares, one entry each: a typer function returning oasr.batch's arguments.
OWN_OPTIONS = {"separate": _separate_options, "tts": _tts_options, "convert": _convert_options, "quantize": _quantize_options}


def _own_task_options(task: str, args: list[str]) -> dict[str, Any]:
    app = new_app(f"oasr batch {task}")
    app.command()(OWN_OPTIONS[task])
    return typer.main.get_command(app).main(args=args, prog_name=f"oasr batch {task} MANIFEST -o OUTDIR", standalone_mode=False)


# --- progress ------------------------------------------------------------------------------------------


def _counts(p) -> str:
    return f"{p.done} done, {p.failed} failed, {p.skipped} skipped"


def _rate_eta(p) -> str:
    worked = p.done + p.failed
    if not worked or p.elapsed <= 0:
        return ""
    rate = worked / p.elapsed
    left = p.total - p.finished
    return f", {rate:.2f} inputs/s, ETA {left / rate:.0f} s"


class _Progress:
    """A bar on a terminal (done / failed / skipped, rate, ETA); off one, a status line every
    STATUS_SECONDS; each failed input as an ``oasr: error:`` line either way."""

    def __init__(self, task: str, bar: bool, quiet: bool):
        self.task, self.quiet = task, quiet
        self.bar = None
        self.last_line = time.monotonic()
        if bar:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn(f"{task}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[counts]}"),
                TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                console=Console(stderr=True), transient=True,
            )
            self.bar_id = None

    def __enter__(self):
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            return self.bar.__exit__(*exc)
        return None

    def _say(self, line: str) -> None:
        if self.bar is not None:
            self.bar.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=sys.stderr, flush=True)

    def update(self, p) -> None:
        record = p.record or {}
        if record.get("status") == "failed" and not self.quiet:
            self._say(f"oasr: error: {record.get('error')}")
        if self.bar is not None:
            worked = p.done + p.failed
            rate = f"{worked / p.elapsed:.2f}/s" if worked and p.elapsed > 0 else ""
            if self.bar_id is None:
                self.bar_id = self.bar.add_task(self.task, total=p.total, counts="", rate="")
            self.bar.update(self.bar_id, completed=p.finished, counts=_counts(p), rate=rate)
        elif not self.quiet and time.monotonic() - self.last_line >= STATUS_SECONDS:
            self.last_line = time.monotonic()
            self._say(f"oasr: batch {self.task}: {p.finished}/{p.total} ({_counts(p)}){_rate_eta(p)}")


def _summary_line(s) -> str:
    line = f"oasr: batch {s.task}: {s.total} input(s): {s.done} done, {s.failed} failed, {s.skipped} skipped in {s.seconds:.1f} s"
    if s.not_started:
        line += f"; stopped after {s.failed} failure(s), {s.not_started} not started"
    return f"{line}; see {s.journal}"
