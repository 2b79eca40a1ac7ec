"""The batch loop every audio command shares, and where its results go.

Cheap checks run first, so a typo does not wait for a model to load; an error about the model or
the options stops the batch; a bad file is reported on one line and the batch goes on (unless
--fail-fast), and the command exits 1 at the end with a summary.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import traceback
from pathlib import Path
from typing import Callable

import typer

from oasr.errors import InputError, OasrError

from .errors import debug_enabled, report

log = logging.getLogger("oasr")

DASH = "-"  # stdin as an input, stdout as -o
Route = list[tuple[str, Path | None]]  # per input: (format, path, or None for stdout)


def fatal_errors() -> tuple[type[BaseException], ...]:
    """Errors about the model or the options, not the file: the whole batch stops."""
    from oasr.errors import BundleError, CapabilityError, ConversionError, DetectionError, LoadError

    return (BundleError, CapabilityError, ConversionError, DetectionError, LoadError)


class Batch:
    """Run ``process`` on each input in turn; ``failed`` lists the inputs that failed.

    Subclasses implement ``process(src, route, progress)`` and may override ``prepare`` (runs
    once, after the checks, only when there is work: load the model there) and ``finish``.
    """

    def __init__(self, sources: list[str], routes: list[Route], fail_fast: bool):
        self.sources = sources
        self.routes = routes
        self.fail_fast = fail_fast
        self.failed: list[str] = []
        self._printed = 0  # results printed on stdout so far

    def prepare(self) -> None:
        pass

    def process(self, src: str, route: Route, progress) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        pass

    def run(self, show_progress: bool) -> None:
        from oasr.io.audio import STDIN, check_audio_path

        pending = []
        for src, route in zip(self.sources, self.routes):
            if src != STDIN:
                try:
                    check_audio_path(src)
                except InputError as e:
                    if self.fail(src, e):
                        return
                    continue
            for _, path in route:
                if path is not None:
                    path.parent.mkdir(parents=True, exist_ok=True)
            pending.append((src, route))
        if not pending:
            return
        self.prepare()
        with progress_bar(show_progress) as progress:
            for src, route in pending:
                try:
                    self.process(src, route, progress)
                except fatal_errors():
                    raise
                except Exception as e:
                    if self.fail(src, e):
                        break
        self.finish()

    def emit(self, src: str, text: str, *, header: bool = True) -> None:
        """Print one input's result; several inputs get a ``==> src <==`` line before each."""
        if header and len(self.sources) > 1:
            text = ("\n" if self._printed else "") + f"==> {src} <==\n" + text
        sys.stdout.write(text)
        sys.stdout.flush()
        self._printed += 1

    def fail(self, src: str, exc: BaseException) -> bool:
        """Report a failed input on one line; True when the batch stops here (--fail-fast)."""
        self.failed.append(src)
        if isinstance(exc, (OasrError, OSError)):
            if debug_enabled():
                traceback.print_exception(exc, file=sys.stderr)
            message = " ".join(str(exc).split()) or type(exc).__name__
            if src not in message:
                message = f"{src}: {message}"
            print(f"oasr: error: {message}", file=sys.stderr)
        else:
            report(exc)  # "internal error: ..." with the OASR_DEBUG hint
        return self.fail_fast

    def exit_if_failed(self) -> None:
        if self.failed:
            if len(self.sources) > 1:
                names = ", ".join(self.failed)
                typer.echo(f"oasr: {len(self.failed)} of {len(self.sources)} file(s) failed: {names}", err=True)
            raise typer.Exit(1)


def usage(message: str, hint: str | None = None) -> typer.BadParameter:
    return typer.BadParameter(message, param_hint=hint)


def plan_single_format(
    sources: list[str],
    fmt: str | None,
    *,
    formats: tuple[str, ...],
    default: str,
    output: Path | None,
    output_dir: Path | None,
    json_out: bool,
    from_suffix: Callable[[Path], str | None],
    shared_file_format: str | None = None,
) -> tuple[str, list[Route]]:
    """One format for every input, and where each result goes: stdout, -o FILE or --output-dir DIR.

    ``shared_file_format``: the one format whose results for several inputs may share one -o FILE
    (RTTM lines name their file); any other format takes -o FILE for one input only.
    """
    if not sources:
        raise usage("give at least one audio file (AUDIO or -f AUDIO; - reads stdin)")
    if sources.count(DASH) > 1:
        raise usage("stdin ('-') can be read only once")
    to_stdout = output is not None and str(output) == DASH
    out_file = output if output is not None and not to_stdout else None
    if out_file is not None and output_dir is not None:
        raise usage("give -o FILE or --output-dir DIR, not both")
    if json_out:
        if out_file is not None or output_dir is not None:
            raise usage("--json prints JSON on stdout; to write JSON files use -F json with -o or --output-dir")
        if fmt not in (None, "json"):
            raise usage("--json prints the JSON format; drop -F (or use -F json)")
        fmt = "json"
    if output_dir is not None:
        fmt = fmt or default
        if output_dir.exists() and not output_dir.is_dir():
            raise usage(f"{output_dir} exists and is not a directory", "'--output-dir'")
        seen: dict[Path, str] = {}
        routes: list[Route] = []
        for src in sources:
            path = output_dir / f"{'stdin' if src == DASH else Path(src).stem}.{fmt}"
            if path in seen:
                raise usage(f"{seen[path]} and {src} would both write {path}; process them separately")
            seen[path] = src
            routes.append([(fmt, path)])
        return fmt, routes
    if out_file is not None:
        if out_file.is_dir():
            raise usage(f"{out_file} is a directory; use --output-dir {out_file}", "'-o' / '--output'")
        fmt = fmt or from_suffix(out_file)
        if fmt is None:
            raise usage(f"cannot tell the format from {out_file.name!r}; add -F {'|'.join(formats)}", "'-o' / '--output'")
        if len(sources) > 1 and fmt != shared_file_format:
            shared = f"; several share one file only as {shared_file_format.upper()}" if shared_file_format else ""
            raise usage(f"-o {out_file} takes one input in {fmt}{shared} (use --output-dir DIR for a batch)")
        return fmt, [[(fmt, out_file)] for _ in sources]
    fmt = fmt or default
    return fmt, [[(fmt, None)] for _ in sources]


# --- progress -----------------------------------------------------------------------------------


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


def progress_bar(enabled: bool):
    """A bar on stderr when enabled (a terminal, not --quiet), else nothing; yields None then."""
    return _RichProgress() if enabled else contextlib.nullcontext(None)


def file_progress(progress: _RichProgress | None, name: str, total: float):
    """The ``progress(done, total)`` callback for one file, or None without a bar."""
    return progress.task(name, total) if progress is not None else contextlib.nullcontext(None)
