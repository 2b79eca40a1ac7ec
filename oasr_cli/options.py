"""Option types shared by every command, defined once."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer


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
AudioFilesOpt = Annotated[
    Optional[list[str]],
    typer.Option("--file", "-f", help="An audio file to process ('-' reads stdin); repeat for a batch.", metavar="AUDIO", show_default=False),
]
OutputDirOpt = Annotated[
    Optional[Path],
    typer.Option("--output-dir", help="Write one file per input and format into DIR (created if missing).", metavar="DIR"),
]
