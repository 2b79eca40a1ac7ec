"""Option types and app settings shared by every command, defined once."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer


CONTEXT = {"help_option_names": ["-h", "--help"]}


def new_app(name: str, help: str | None = None, *, epilog: str | None = None) -> typer.Typer:
    """A Typer app (a program or a command group) with oasr's settings: -h, no completion
    options (``oasr completion`` and the generated scripts do that), exceptions left to
    ``oasr_cli.errors``."""
    return typer.Typer(
        name=name,
        help=help,
        epilog=epilog,
        no_args_is_help=True,
        add_completion=False,
        context_settings=CONTEXT,
        pretty_exceptions_enable=False,
    )


def optional_float(text: Any) -> float | None:
    """The parser of a number flag that none/off switches off (a threshold, a gate)."""
    if text is None or isinstance(text, (int, float)):  # a default, already parsed
        return text
    if text.strip().lower() in ("none", "off"):
        return None
    try:
        return float(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a number (or 'none' to switch it off)") from None


class Dtype(str, Enum):
    auto = "auto"
    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


ArchitectureOpt = Annotated[
    Optional[str],
    typer.Option(
        "--architecture",
        "-a",
        help="Skip detection: a converter name (ctranslate2, hf-whisper, openai-whisper) or an architecture (whisper).",
        metavar="NAME",
    ),
]
DtypeOpt = Annotated[Dtype, typer.Option("--dtype", help="Weight precision; auto keeps the source's (convert) or picks per device (run).")]
DeviceOpt = Annotated[Device, typer.Option("--device", help="Where the model runs; auto picks CUDA when present.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print a machine-readable JSON report on stdout.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Redo the work even when the destination is up to date.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Only errors on stderr.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Log decisions on stderr.")]
OutputOpt = Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to FILE instead of stdout ('-' is stdout).", metavar="FILE")]
FailFastOpt = Annotated[bool, typer.Option("--fail-fast", help="Stop at the first failed input instead of going on.")]
ModelOpt = Annotated[
    str,
    typer.Option(
        "--model",
        "-m",
        help="A native bundle, a checkpoint directory (converted on the fly), or a registry name (auto: the default model).",
        metavar="MODEL",
    ),
]
LanguageOpt = Annotated[
    Optional[str],
    typer.Option("--language", "-l", help="Language code of the speech (en, de, ...); auto or unset detects it.", metavar="CODE"),
]
AudioArg = Annotated[
    Optional[list[str]],
    typer.Argument(help="Audio files ('-' reads stdin), after those given with -f.", metavar="AUDIO", show_default=False),
]
AudioFilesOpt = Annotated[
    Optional[list[str]],
    typer.Option("--file", "-f", help="An audio file to process ('-' reads stdin); repeat for a batch.", metavar="AUDIO", show_default=False),
]
OutputDirOpt = Annotated[
    Optional[Path],
    typer.Option("--output-dir", help="Write one file per input and format into DIR (created if missing).", metavar="DIR"),
]
