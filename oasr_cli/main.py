"""Entry points: ``oasr`` (all commands) and ``oasr-convert`` (the convert command alone).

Command modules import the runtime inside their bodies, so ``oasr --help`` never loads torch.
"""

from __future__ import annotations

import sys

import typer
from typer._completion_classes import completion_init

from oasr.version import __version__

from .commands.convert import convert
from .commands.diarize import diarize
from .commands.eval import app as eval_app
from .commands.inspect import inspect
from .commands.models import app as models_app
from .commands.quantize import quantize
from .commands.pitch import pitch
from .commands.transcribe import transcribe
from .errors import run

# The apps are built with add_completion=False (no --install-completion options), and that also
# skips Typer's registration of its shell-completion classes, so the _OASR_COMPLETE /
# _OASR_CONVERT_COMPLETE hook would answer "Shell bash not supported". Register them here; the
# scripts in completions/ (scripts/gen_cli_docs.py) rely on it.
completion_init()

HELP = "Speech checkpoints from any ecosystem, one native bundle, one command line."

app = typer.Typer(
    name="oasr",
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"oasr {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Speech checkpoints from any ecosystem, one native bundle, one command line."""


app.command(no_args_is_help=True)(convert)
app.command()(inspect)
app.add_typer(models_app, name="models")
app.command(no_args_is_help=True)(quantize)
app.command(no_args_is_help=True)(transcribe)
app.command(no_args_is_help=True)(pitch)
app.command(no_args_is_help=True)(diarize)
app.add_typer(eval_app, name="eval")

convert_app = typer.Typer(
    name="oasr-convert",
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)
convert_app.command(no_args_is_help=True)(convert)


def main(argv: list[str] | None = None) -> int:
    return run(typer.main.get_command(app), argv, "oasr")


def convert_main(argv: list[str] | None = None) -> int:
    return run(typer.main.get_command(convert_app), argv, "oasr-convert")


if __name__ == "__main__":
    sys.exit(main())
