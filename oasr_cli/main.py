"""Entry points: ``oasr`` (all commands) and ``oasr-convert`` (the convert command alone).

Command modules import the runtime inside their bodies, so ``oasr --help`` never loads torch.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
from typing import NoReturn


def _interrupted_while_starting(signum, frame):  # Ctrl-C while the imports below run
    sys.stderr.write("oasr: interrupted\n")
    raise SystemExit(130)


def _guard_startup():
    """The previous SIGINT handler, after putting ``_interrupted_while_starting`` in its place
    (only over Python's default one, in the main thread); None when left alone."""
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            return signal.signal(signal.SIGINT, _interrupted_while_starting)
    except ValueError:  # not the main thread
        pass
    return None


_startup_handler = _guard_startup()

from oasr.threads import apply_wait_policy  # noqa: E402

from .torch_import import import_without_collector  # noqa: E402

apply_wait_policy()  # before anything imports torch: OpenMP reads it once, at load
import_without_collector()  # the command imports torch when it needs it: without the collector then

import typer  # noqa: E402
from typer._completion_classes import completion_init  # noqa: E402

from oasr.version import __version__  # noqa: E402

from .commands import convert, corpus, diarize, inspect, pitch, quantize, serve, transcribe, tts  # noqa: E402
from .commands import manual, separate  # noqa: E402
from .commands.completion import app as completion_app  # noqa: E402
from .commands.eval import app as eval_app  # noqa: E402
from .commands.models import app as models_app  # noqa: E402
from . import kernel_caches, plain_help, spellings  # noqa: E402
from .errors import run  # noqa: E402
from .options import new_app  # noqa: E402

# The apps are built with add_completion=False (no --install-completion options), and that also
# skips Typer's registration of its shell-completion classes, so the _OASR_COMPLETE /
# _OASR_CONVERT_COMPLETE hook would answer "Shell bash not supported". Register them here; the
# scripts of `oasr completion` and completions/ rely on it.
completion_init()

HELP = "Speech checkpoints from any ecosystem, one native bundle, one command line."

EXAMPLES = """Examples:

Transcribe a recording with the default model (fetched and converted once):
  oasr transcribe talk.wav

Convert a faster-whisper checkpoint, then run it:
  oasr convert ./faster-whisper-small ./whisper-small
  oasr transcribe -m ./whisper-small -F srt -o talk.srt talk.wav

See every command's options and examples (or its manual page):
  oasr transcribe --help
  oasr man transcribe

Long options may be spelled as whisper spells them, with underscores:
  oasr transcribe --output_dir subs --word_timestamps True talk.wav
"""

app = new_app("oasr", HELP, epilog=EXAMPLES)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"oasr {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Speech checkpoints from any ecosystem, one native bundle, one command line."""


# The audio commands have no no_args_is_help: without input they say, in one line, what is missing.
app.command(no_args_is_help=True, epilog=convert.EXAMPLES)(convert.convert)
app.command(epilog=inspect.EXAMPLES)(inspect.inspect)
app.add_typer(models_app, name="models")
app.command(no_args_is_help=True, epilog=quantize.EXAMPLES)(quantize.quantize)
app.command(epilog=transcribe.EXAMPLES)(transcribe.transcribe)
app.command(epilog=pitch.EXAMPLES)(pitch.pitch)
app.command(epilog=separate.EXAMPLES)(separate.separate)
app.command(epilog=diarize.EXAMPLES)(diarize.diarize)
app.command(epilog=tts.EXAMPLES)(tts.tts)
app.command("batch", no_args_is_help=True, context_settings=corpus.CONTEXT, epilog=corpus.EXAMPLES)(corpus.batch)
app.command(epilog=serve.EXAMPLES)(serve.serve)
app.add_typer(eval_app, name="eval")
app.add_typer(completion_app, name="completion")
app.command("man", epilog=manual.EXAMPLES)(manual.man)

convert_app = new_app("oasr-convert")
convert_app.command(no_args_is_help=True, epilog=convert.EXAMPLES)(convert.convert)


if _startup_handler is not None:  # imported: Ctrl-C is a KeyboardInterrupt again (errors.run reports it)
    signal.signal(signal.SIGINT, _startup_handler)


def _run(typer_app: typer.Typer, argv: list[str] | None, prog_name: str) -> int:
    kernel_caches.cap()
    command = typer.main.get_command(typer_app)
    args = spellings.accept(command, list(sys.argv[1:] if argv is None else argv))
    with plain_help.when_piped():
        return run(command, args, prog_name)


def main(argv: list[str] | None = None) -> int:
    return _run(app, argv, "oasr")


def convert_main(argv: list[str] | None = None) -> int:
    return _run(convert_app, argv, "oasr-convert")


def exit_process(code: int) -> NoReturn:
    """End the process with ``code``. Once torch is loaded, Python's own teardown frees its
    thousands of objects one by one (0.5-0.7 s measured, after the work is done), which the
    system does at once: so the exit handlers run and the standard streams are flushed, then the
    process ends. Every output file is closed (renamed into place) before this point."""
    if "torch" not in sys.modules:
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the reader is gone, or the stream closed: nothing to keep
            pass
    os._exit(code)


def entry() -> NoReturn:
    """The ``oasr`` console script."""
    exit_process(main())


def convert_entry() -> NoReturn:
    """The ``oasr-convert`` console script."""
    exit_process(convert_main())


if __name__ == "__main__":
    entry()
