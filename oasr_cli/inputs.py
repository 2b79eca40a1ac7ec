"""The input runner every audio command shares: its flags, where results go, and the loop over
the command's inputs (several AUDIO arguments; ``oasr batch`` is the corpus runner, ``oasr.corpus``).

A command is its own flags, its options dataclass and one ``run_inputs`` call::

    @audio_command("transcribe")
    def transcribe(model: ModelOpt = "auto", ..., *, flags: InputFlags) -> None:
        plan = plan_outputs(flags, requested, formats, default="txt")
        options = from_flags(TranscribeOptions, locals(), ...)  # a bad value: a usage error, exit 2
        run_inputs(flags, plan, InputJob(task="transcribe", models=..., options=options, ...))

``audio_command`` adds the flags the runner owns (AUDIO..., -f, -o, --output-dir, --json, --device,
--dtype, --fail-fast, -q, -v) to the command's signature and hands them over as one
``InputFlags``. ``run_inputs`` checks the cheap things first (every input exists, output folders),
so a typo does not wait for a model; loads the models once, through ``oasr.load_pretrained(...,
task=...)`` (the hub's steps as a spinner on a terminal); then runs each input through the
runtime's ``run_file`` (``oasr.pipelines.file_tasks``, which ``oasr batch`` runs too) with a
progress bar on a terminal and a timing line in the log, and writes each result atomically or
prints it. An error about a model or the options stops the run; a bad file is reported on one
line and the run goes on (unless --fail-fast), then exits 1 with a summary. A closed stdout
(``| head``) ends the run quietly.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable, Mapping, Optional, Sequence

import typer

from oasr.errors import InputError, OasrError
from oasr.threads import set_threads

from .errors import OneLineUsage, debug_enabled, report, silence_stdout
from .options import COMPUTE_TYPES, MAX_AUDIO_SECONDS, AudioArg, AudioFilesOpt, Device, DeviceOpt, FailFastOpt, JsonOpt, MaxAudioOpt, OutputDirOpt, OutputOpt, QuietOpt, RunDtype, RunDtypeOpt, ThreadsOpt, VerboseOpt, flag_group, usage

from .output import hub_progress, interactive, setup_logging

log = logging.getLogger("oasr")

DASH = "-"  # stdin as an input, stdout as -o
Route = list[tuple[str, Path | None]]  # per input: (format, path, or None for stdout)


# --- the flags ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class InputFlags:
    """The flags every audio command shares: its inputs, where results go, the device, the log."""

    sources: list[str]  # -f AUDIO..., then AUDIO...
    output: Path | None
    output_dir: Path | None
    json_out: bool
    device: str
    dtype: str
    fail_fast: bool
    quiet: bool
    verbose: bool
    verb: str  # what the command does to audio, for "no audio to <verb>"
    threads: int | None = None
    max_audio_seconds: float = MAX_AUDIO_SECONDS


def _input_flags(verb: str) -> Callable[..., InputFlags]:
    def build(audio, files, output, output_dir, json_out, device, dtype, threads, max_audio_seconds, fail_fast, quiet, verbose) -> InputFlags:
        sources = [*(files or []), *(audio or [])]
        dtype = COMPUTE_TYPES.get(dtype.value, dtype.value)
        setup_logging(quiet, verbose)  # in effect from the start of the command: its flag checks log too
        return InputFlags(sources, output, output_dir, json_out, device.value, dtype, fail_fast, quiet, verbose, verb, threads, max_audio_seconds)

    return build


def audio_command(verb: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Decorator: give a command the runner's flags; it receives them as ``flags: InputFlags``."""
    return flag_group(
        "flags",
        _input_flags(verb),
        before=(("audio", AudioArg, None), ("files", AudioFilesOpt, None)),
        after=(
            ("output", OutputOpt, None),
            ("output_dir", OutputDirOpt, None),
            ("json_out", JsonOpt, False),
            ("device", DeviceOpt, Device.auto),
            ("dtype", RunDtypeOpt, RunDtype.auto),
            ("threads", ThreadsOpt, None),
            ("max_audio_seconds", MaxAudioOpt, MAX_AUDIO_SECONDS),
            ("fail_fast", FailFastOpt, False),
            ("quiet", QuietOpt, False),
            ("verbose", VerboseOpt, False),
        ),
    )


def flag_values(given: Any) -> list[str]:
    """-F's values as plain names: None, one Enum member or a list of them."""
    if given is None:
        return []
    return [getattr(v, "value", v) for v in (given if isinstance(given, (list, tuple)) else [given])]


# --- --plot: a picture of the one input ------------------------------------------------------------


def plot_option(picture: str) -> Any:
    """The type of --plot FILE.png, for the signature of a command that draws ``picture``."""
    help = f"Also draw {picture} into FILE.png (one input; needs matplotlib)."
    return Annotated[Optional[Path], typer.Option("--plot", metavar="FILE.png", help=help, rich_help_panel="Output")]


def plot_writer(plot: Path | None, flags: InputFlags, draw: Callable[[Any, Any], bytes]) -> Callable[[Any, Any], None] | None:
    """--plot checked before any work (one input, matplotlib installed, a path that can be
    written), as the job's ``plot``: ``draw(result, samples)``'s PNG written atomically."""
    if plot is None:
        return None
    if len(flags.sources) != 1:
        raise usage(f"--plot draws one input, not {len(flags.sources)}")
    if CAPTURE.get() is None:  # (`oasr batch` refuses --plot itself, whatever is installed)
        from oasr.formats.pitch_plot import require_matplotlib

        require_matplotlib()  # a missing extra is one line, exit 1
        check_output_path(plot)

    def write(result: Any, samples: Any) -> None:
        write_output(plot, draw(result, samples))
        log.info("wrote %s", plot)

    return write


# --- where results go ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """Where each input's results go, as formats and paths (None: stdout)."""

    routes: list[Route]
    shared: Path | None = None  # several inputs' results joined into this one -o FILE

    @property
    def formats(self) -> list[str]:
        return [fmt for fmt, _ in self.routes[0]] if self.routes else []


def plan_outputs(
    flags: InputFlags,
    requested: Sequence[str],
    formats: Mapping[str, str],
    *,
    default: str,
    shared_file_format: str | None = None,
) -> Plan:
    """The formats asked for (-F, repeatable; "all"), and for each input where each goes: stdout,
    -o FILE (its extension picks the format), or one file per input and format in --output-dir.

    ``formats``: every format name and its file extension. ``shared_file_format``: the one format
    whose results for several inputs may share one -o FILE (RTTM lines name their file).
    """
    sources = flags.sources
    if not sources:
        raise OneLineUsage(f"no audio to {flags.verb}: pass -f AUDIO (or AUDIO; '-' reads stdin)")
    if sources.count(DASH) > 1:
        raise usage("stdin ('-') can be read only once")
    names = list(dict.fromkeys(f for name in requested for f in (formats if name == "all" else (name,))))
    by_suffix = {ext: name for name, ext in formats.items()}
    to_stdout = flags.output is not None and str(flags.output) == DASH
    out_file = flags.output if flags.output is not None and not to_stdout else None
    output_dir = flags.output_dir
    if out_file is not None and output_dir is not None:
        raise usage("give -o FILE (one input) or --output-dir DIR (a batch), not both")
    if flags.json_out:
        if out_file is not None or output_dir is not None:
            raise usage("--json prints JSON on stdout; to write JSON files use -F json with -o or --output-dir")
        if names not in ([], ["json"]):
            raise usage("--json prints the JSON format; drop -F (or use -F json)")
        names = ["json"]

    if output_dir is None and out_file is None and not to_stdout and len(names) > 1:
        output_dir = Path(".")  # several formats and no destination: whisper's default folder, this one
        log.info("writing %s into the current folder (--output-dir DIR for another)", ", ".join(names))
    if output_dir is not None:
        names = names or [default]
        if output_dir.exists() and not output_dir.is_dir():
            raise usage(f"{output_dir} exists and is not a directory", "'--output-dir'")
        seen: dict[Path, str] = {}
        routes = []
        for src in sources:
            stem = "stdin" if src == DASH else Path(src).stem
            targets: Route = [(f, output_dir / f"{stem}.{formats[f]}") for f in names]
            for _, path in targets:
                if path in seen:
                    raise usage(f"{seen[path]} and {src} would both write {path}; process them separately")
                seen[path] = src  # type: ignore[index]
            routes.append(targets)
        return Plan(routes)

    if out_file is not None:
        if out_file.is_dir():
            raise usage(f"{out_file} is a directory; use --output-dir {out_file}", "'-o' / '--output'")
        guessed = by_suffix.get(out_file.suffix.lower().lstrip("."))
        names = names or ([guessed] if guessed else [])
        if not names:
            raise usage(f"cannot tell the format from {out_file.name!r}; add -F {'|'.join(formats)}", "'-o' / '--output'")
        if len(sources) > 1:
            if names != [shared_file_format]:
                shared = f" (several share one file only as {shared_file_format.upper()})" if shared_file_format else ""
                raise usage(f"-o {out_file} takes one input, not {len(sources)}{shared}; use --output-dir DIR for a batch")
            return Plan([[(names[0], out_file)] for _ in sources], shared=out_file)
        if len(names) == 1:
            return Plan([[(names[0], out_file)]])
        base = out_file.with_suffix("") if guessed else out_file
        return Plan([[(f, base.parent / f"{base.name}.{formats[f]}") for f in names]])

    names = names or [default]
    if len(names) > 1:
        raise usage("several output formats (-F all) cannot all go to stdout; drop -o - (or use --output-dir DIR)")
    return Plan([[(names[0], None)] for _ in sources])


# --- the run -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InputJob:
    """What a command does with each input, for ``run_inputs``: an audio task of the runtime's
    (``oasr.pipelines.file_tasks``), with the command's options and how its results are shown.
    ``oasr batch TASK`` takes the same fields (models, options, writer_options) to its workers."""

    task: str  # a name in oasr.pipelines.file_tasks.FILE_TASKS
    models: tuple[tuple[str, str], ...]  # (name or path as given, its task in oasr.tasks.TASKS), each loaded once
    options: Any  # the task's options dataclass
    json_line: Callable[[Any], str]  # result -> one compact JSON line (several inputs on stdout: JSON Lines)
    describe: Callable[[Any], str]  # what the timing line adds: "2 speaker(s), 5 turn(s)"
    writer_options: Any = None  # transcripts: the subtitle layout
    # Formats whose results of several inputs join into one stream (stdout, a shared -o FILE) without
    # "==> file <==" lines: format -> (result, first piece?) -> text.
    joined: Mapping[str, Callable[[Any, bool], str]] = field(default_factory=dict)
    plot: Callable[[Any, Any], None] | None = None  # --plot (one input): (result, samples) -> draws the picture

    def render(self, result: Any, fmt: str) -> str:
        """The text of one file of ``result`` in ``fmt``."""
        from oasr.pipelines.file_tasks import file_task

        return file_task(self.task).render(result, fmt, self.writer_options)


# `oasr batch TASK ... [task options]` parses the task options with the task's own command: while
# a list is set here, run_inputs appends (flags, plan, job) to it and returns without running.
CAPTURE: contextvars.ContextVar[list | None] = contextvars.ContextVar("oasr_corpus_capture", default=None)


def fatal_errors() -> tuple[type[BaseException], ...]:
    """Errors about the model or the options, not the file: the whole run stops."""
    from oasr.errors import BundleError, CapabilityError, ConversionError, DetectionError, LoadError

    return (BundleError, CapabilityError, ConversionError, DetectionError, LoadError)


def run_inputs(flags: InputFlags, plan: Plan, job: InputJob) -> None:
    """Run ``job`` on every input of ``flags`` and put the results where ``plan`` says; exit 1
    at the end when an input failed."""
    captured = CAPTURE.get()
    if captured is not None:
        captured.append((flags, plan, job))
        return
    setup_logging(flags.quiet, flags.verbose)
    set_threads(flags.threads)
    from oasr.io.audio import set_max_seconds

    set_max_seconds(flags.max_audio_seconds)
    run = InputRun(flags, plan)
    pending = run.check()
    if pending:
        from oasr.pipelines.file_tasks import file_task, run_file

        task = file_task(job.task)
        models = load_models(job.models, flags)
        with progress_bar(interactive(flags.quiet), status=not flags.quiet) as bar:

            def one(src: str, route: Route) -> None:
                started = time.perf_counter()
                result, seconds = run_file(
                    task, src, models, job.options, device=flags.device, dtype=flags.dtype,
                    progress_for=lambda total: file_progress(bar, src, total, segments=flags.verbose and job.task == "transcribe"), plot=job.plot,
                )
                log.info("%s: %.1f s of audio in %.1f s, %s", src, seconds, time.perf_counter() - started, job.describe(result))
                run.write(src, result, route, job)

            run.each(pending, one)
        run.finish()
    run.exit_if_failed()


def load_models(models: tuple[tuple[str, str], ...], flags: InputFlags) -> tuple:
    """Each (name, task) loaded once, the hub's steps as a spinner on a terminal."""
    import oasr

    loaded = []
    for spec, task in models:
        started = time.perf_counter()
        log.info("loading %s for %s (device %s, dtype %s)", spec, task, flags.device, flags.dtype)
        with hub_progress(interactive(flags.quiet)) as progress:
            loaded.append(oasr.load_pretrained(spec, task=task, device=flags.device, dtype=flags.dtype, progress=progress))
        log.info("%s ready in %.1f s", spec, time.perf_counter() - started)
    return tuple(loaded)


class InputRun:
    """The state of one run over a command's inputs: what failed, what was printed, the pieces of
    a shared -o FILE."""

    def __init__(self, flags: InputFlags, plan: Plan):
        self.flags, self.plan = flags, plan
        self.several = len(flags.sources) > 1
        self.failed: list[str] = []
        self.printed = 0  # results printed on stdout so far
        self.collected: list[str] = []  # pieces of the shared -o FILE

    def check(self) -> list[tuple[str, Route]]:
        """The inputs worth running: each exists (else it failed already). Where the outputs go is
        checked here too, but no folder is made until an output is written there (a failed run
        leaves no new empty folders)."""
        from oasr.io.audio import STDIN, check_audio_path

        pending = []
        for src, route in zip(self.flags.sources, self.plan.routes):
            if src != STDIN:
                try:
                    check_audio_path(src)
                except InputError as e:
                    if self.fail(src, e):
                        return []
                    continue
            for _, path in route:
                if path is not None:
                    check_output_path(path)
            pending.append((src, route))
        return pending

    def each(self, pending: list[tuple[str, Route]], do: Callable[[str, Route], None]) -> None:
        """``do(src, route)`` for each input: a bad file is reported on one line and the run goes
        on (unless --fail-fast); an error about the model or the options stops it; a closed
        stdout (``| head``) ends it quietly."""
        for src, route in pending:
            try:
                do(src, route)
            except BrokenPipeError:  # the reader of stdout is gone: stop, quietly
                silence_stdout()
                break
            except fatal_errors():
                raise
            except Exception as e:
                if self.fail(src, e):
                    break

    def write(self, src: str, result: Any, route: Route, job: InputJob) -> None:
        for fmt, path in route:
            if path is not None and path == self.plan.shared:
                self.collected.append(job.joined[fmt](result, not self.collected))
            elif path is not None:
                write_output(path, job.render(result, fmt))
                log.info("wrote %s", path)
            elif not self.several:
                self._print(job.render(result, fmt))
            elif fmt == "json":  # several inputs: JSON Lines
                self._print(job.json_line(result) + "\n")
            elif fmt in job.joined:
                self._print(job.joined[fmt](result, not self.printed))
            else:  # a "==> src <==" line before each input's result
                self._print(("\n" if self.printed else "") + f"==> {src} <==\n" + job.render(result, fmt))

    def _print(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()
        self.printed += 1

    def finish(self) -> None:
        if self.plan.shared is not None and self.collected:
            write_output(self.plan.shared, "".join(self.collected))
            log.info("wrote %s", self.plan.shared)

    def fail(self, src: str, exc: BaseException) -> bool:
        """Report a failed input on one line; True when the run stops here (--fail-fast)."""
        self.failed.append(src)
        if isinstance(exc, (OasrError, OSError)):
            if debug_enabled():
                traceback.print_exception(exc, file=sys.stderr)
            message = " ".join(str(exc).split()) or type(exc).__name__
            label = "stdin" if src == DASH else src
            if label not in message:
                message = f"{label}: {message}"
            print(f"oasr: error: {message}", file=sys.stderr)
        else:
            report(exc)  # "internal error: ..." with the OASR_DEBUG hint
        return self.flags.fail_fast

    def exit_if_failed(self) -> None:
        if self.failed:
            if self.several:
                names = ", ".join(self.failed)
                typer.echo(f"oasr: {len(self.failed)} of {len(self.flags.sources)} file(s) failed: {names}", err=True)
            raise typer.Exit(1)


def check_output_path(path: Path) -> None:
    """Refuse, before any work, an output whose folder cannot be made: the nearest existing
    ancestor of ``path`` must be a writable folder (a device or FIFO is written in place: its
    folder does not matter). Nothing is created here."""
    import os
    import stat

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return
    except OSError:
        pass
    if os.path.islink(path):  # the link's target is what gets replaced
        path = Path(os.path.realpath(path))
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"cannot write {path}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"cannot write {path}: the folder {parent} is not writable")


def write_output(path: Path, data: str | bytes) -> None:
    """Write one output file (text in UTF-8, or bytes): its missing parent folders are made now,
    and taken away again when the write fails; atomic for a regular file, straight into a device,
    FIFO or link to one (``oasr.io.files.atomic_write_bytes``)."""
    from oasr.io.files import write_with_parents

    write_with_parents(path, data.encode("utf-8") if isinstance(data, str) else data)


# --- progress ----------------------------------------------------------------------------------------


class _RichProgress:
    """A rich progress bar on stderr, in seconds of audio, one line per file."""

    def __init__(self):
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:.1f}/{task.total:.1f} s"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )

    def __enter__(self):
        self._progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self._progress.__exit__(*exc)

    def say(self, line: str) -> None:
        self._progress.console.print(line, markup=False, highlight=False)

    @contextlib.contextmanager
    def task(self, name: str, total: float):
        """A bar for one file while the block runs; yields the ``progress(done, total)`` callback."""
        task_id = self._progress.add_task(Path(name).name if name != DASH else "stdin", total=max(total, 1e-3))

        def update(done: float, total_seconds: float | None = None) -> None:
            if total_seconds:
                self._progress.update(task_id, total=total_seconds)
            self._progress.update(task_id, completed=done)

        try:
            yield update
        finally:
            self._progress.remove_task(task_id)


STATUS_SECONDS = 30.0  # off a terminal: one status line per file this often (cron, CI logs)


class _StatusLines:
    """Off a terminal: for a long file, a line every STATUS_SECONDS on stderr with the position,
    the speed (seconds of audio per second) and the time left; nothing for one done sooner."""

    def __init__(self, every: float | None = None):
        self.every = STATUS_SECONDS if every is None else every

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def say(self, line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def task(self, name: str, total: float):
        label = "stdin" if name == DASH else name
        started = last = time.monotonic()
        seen = {"total": total}

        def update(done: float, total_seconds: float | None = None) -> None:
            nonlocal last
            if total_seconds:
                seen["total"] = total_seconds
            now = time.monotonic()
            if now - last < self.every or done <= 0:
                return
            last = now
            speed = done / max(now - started, 1e-9)
            whole = seen["total"]
            left = f", {_clock((whole - done) / speed)} left" if whole and speed > 0 and whole > done else ""
            share = f" ({100 * done / whole:.0f}%)" if whole else ""
            self.say(f"oasr: {label}: {_clock(done)} of {_clock(whole)}{share}, {speed:.1f}x real time{left}")

        yield update


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds + 0.5))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else f"{seconds // 60}:{seconds % 60:02d}"


class _Heard:
    """A file's progress callback that also prints each segment as it is decoded (-v, as
    whisper's --verbose does): ``[00:01.000 --> 00:04.200] text`` on stderr, above a bar."""

    def __init__(self, update, say: Callable[[str], None]):
        self.update, self.say = update, say

    def __call__(self, done: float, total: float | None = None) -> None:
        if self.update is not None:
            self.update(done, total)

    def segment(self, segment) -> None:
        speaker = f" {segment.speaker}:" if getattr(segment, "speaker", None) else ""
        self.say(f"[{_stamp(segment.start)} --> {_stamp(segment.end)}]{speaker} {segment.text.strip()}")


def _stamp(seconds: float) -> str:
    ms = int(round(seconds * 1000))
    hours = f"{ms // 3_600_000:02d}:" if ms >= 3_600_000 else ""
    return f"{hours}{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"


def progress_bar(enabled: bool, status: bool = False):
    """A bar on stderr when enabled (a terminal, not --quiet); else, with ``status``, a status
    line now and then (``_StatusLines``); else nothing, and it yields None."""
    if enabled:
        return _RichProgress()
    return _StatusLines() if status else contextlib.nullcontext(None)


@contextlib.contextmanager
def file_progress(progress, name: str, total: float, segments: bool = False):
    """The ``progress(done, total)`` callback for one file (None without a display); with
    ``segments``, one that prints each decoded segment too."""
    if progress is None and not segments:
        yield None
        return
    with progress.task(name, total) if progress is not None else contextlib.nullcontext(None) as update:
        if not segments:
            yield update
            return
        say = progress.say if progress is not None else (lambda line: print(line, file=sys.stderr, flush=True))
        yield _Heard(update, say)
